"""The orchestrator's own keys, by the variables that hold them. No stage is ever handed
one, whatever its ``pass_env`` says: with the ledger key a stage could rewrite a past
decision so that ``ledger verify`` still says OK; with the approval key it could sign
its own approval."""

from __future__ import annotations

from typing import Final

LEDGER_KEY_ENV: Final = "ORCHESTRATOR_LEDGER_KEY"
APPROVAL_KEY_ENV: Final = "ORCHESTRATOR_APPROVAL_KEY"
ORCHESTRATOR_ONLY: Final = frozenset({LEDGER_KEY_ENV, APPROVAL_KEY_ENV})
