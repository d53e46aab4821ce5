"""Verdict actions carried out: one module per action, each with its pure plan (what the
mutator will do, stated as data) and its apply (doing it). ``registry.py`` holds them by
the vocabulary's names (``orchestrator/domain/vocabulary.py`` declares the words: verdict
models, routing defaults, prompt lines, rules); nothing below ``app/`` imports this package.

    rerun.py           retry · escalate-model · switch-engine: re-run the code stage
    split.py           write sub-tickets beside the parent
    abandon.py         write the hand-off; the ticket needs a human
    mechanical_fix.py  run a recipe, verify with the original failing check
    budget.py          the retry budget a re-running action is charged against
    spec.py            ActionSteps: an action's plan and apply, under its name
    proposal.py        the one place a Proposal is read
    plan.py            Dispatch (the plan), Effect (what happens next), shared plan rules

``apply`` imports what it runs with when it is called.
"""
