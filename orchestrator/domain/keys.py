"""The orchestrator's secrets, by the variables that hold them: which names look like a
secret (withheld from stages unless ``pass_env`` names them, blanked from our own
/proc/PID/environ), and the orchestrator's own keys, which no stage is ever handed,
whatever its ``pass_env`` says: with the ledger key a stage could rewrite a past decision
so that ``ledger verify`` still says OK; with the approval key it could sign its own
approval. Standard library only: the key shield reads this before ``--help`` prints."""

from __future__ import annotations

import re
from typing import Final

# Not "AUTH": SSH_AUTH_SOCK is how git reaches an ssh agent, and it holds no secret.
SECRET_NAME: Final = re.compile(r"TOKEN|SECRET|KEY|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
# The fleet's broker URL carries its Redis password.
BROKER_URL_ENV: Final = "ORCHESTRATOR_BROKER_URL"
# The PostgreSQL state store's URL carries its password; with it, a stage could rewrite
# run records and approvals the way the ledger and approval keys would let it.
STORAGE_URL_ENV: Final = "ORCHESTRATOR_STORAGE_URL"


def is_secret_name(name: str) -> bool:
    return SECRET_NAME.search(name) is not None


LEDGER_KEY_ENV: Final = "ORCHESTRATOR_LEDGER_KEY"
APPROVAL_KEY_ENV: Final = "ORCHESTRATOR_APPROVAL_KEY"
ORCHESTRATOR_ONLY: Final = frozenset({LEDGER_KEY_ENV, APPROVAL_KEY_ENV, STORAGE_URL_ENV})
# The env file ``orchestrator init`` writes beside the config: it holds every key, so no
# sandboxed process is ever shown it (``execution/stage_sandbox.secret_files``).
ENV_FILE: Final = "orchestrator.env"
