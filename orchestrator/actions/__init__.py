"""Verdict actions: one module per action, each with its pure plan (what the mutator
will do, stated as data) and its apply (doing it), its routing default and its prompt
text. ``registry.py`` collects them; the CLI choices, the ``[routing]`` keys, the
prompt's vocabulary and the verification rules all derive from it.

    rerun.py           retry · escalate-model · switch-engine: re-run the code stage
    split.py           write sub-tickets beside the parent
    abandon.py         write the hand-off; the ticket needs a human
    mechanical_fix.py  run a recipe, verify with the original failing check
    budget.py          the retry budget a re-running action is charged against
    spec.py            ActionSpec: what one action declares
    proposal.py        the one place a Proposal is read
    plan.py            Dispatch (the plan), Effect (what happens next), shared plan rules
    choices.py         the CLI's choices, read lazily (no pydantic at start-up)

The pure parts (everything but each module's ``apply``) import no execution code: the
recovery graph may use them. ``apply`` imports what it runs with when it is called.
"""
