"""The recovery decision: deterministic pre-processing, one model call, deterministic
validation. Nothing in this package executes anything: it reads files and returns typed
values; ``substrate.py`` carries decisions out.

    precheck.py    caps, the clone precondition, the known-failure playbook (no model)
    context.py     the bounded, redacted context bundle
    redact.py      secret redaction for everything that leaves the process
    prompt.py      the one prompt, with the closed vocabulary and the schema
    gateway.py     the ModelGateway protocol and the scripted gateway for tests
    anthropic_gateway.py   the only module that imports the model SDK (lazily)
    verdict.py     the closed-vocabulary verdict schema and its semantic checks
    recipe.py      mechanical-fix recipe validation (allow-list, no shell, inside the clone)
    diagnose.py    the sandwich: decide whether to ask, ask once (bounded re-asks), validate
"""
