"""The recovery decision: deterministic pre-processing, one model call, deterministic
validation. Nothing in this package executes anything or writes a file: it reads what it
is given and returns typed values; ``orchestrator.app.recover`` persists the decision and
the action layer above carries it out.

    graph.py       the twelve-node graph over one typed state; RecoveryAgent.diagnose
    diagnose.py    precheck (clone, playbook, caps, infra) and the model call with bounded re-asks
    audit.py       what exit prepares from the audit memory: the ledger entries
    transcript.py  every model and tool call as a typed record; the replay player
    verdict.py     reading a verdict out of a reply (shape); the vocabulary itself and its
                   rules are orchestrator/domain/verdicts.py and vocabulary.py
    playbook.py    known failures → verdicts, at no cost
    context.py     the bounded, redacted context bundle (secrets out: orchestrator.redaction)
    cleaning.py    look-alike characters folded, this machine's paths shown by their labels
    guardrail.py   the output guardrail;  confidence.py  composed confidence and routing
    investigate.py the bounded investigation loop
    prompt.py      the one prompt, its vocabulary from domain/vocabulary.py
    gateway.py     the ModelGateway protocol, the scripted gateway for tests
    anthropic_gateway.py   the only module that imports the model SDK (lazily)

The records the decision is made of and leaves behind live in ``orchestrator/domain/``
(proposals.py: RecoveryContext, Proposal, Evidence; decisions.py: AuditMemory,
LedgerEntry; transcripts.py: the call records and CallError), so that storage can read
and write them without importing this package.
"""
