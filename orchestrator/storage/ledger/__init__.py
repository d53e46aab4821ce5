"""The decision ledger: ``.state/ledger.jsonl``, append-only and hash-chained.

Every decision the orchestrator makes (and, later, its outcome) is one row, one line. Rows
are never updated: an outcome is a new row whose ``supersedes`` is the decision row's
``entry_hash``. Inputs are recorded as a hash (``inputs_hash``), never as the payload.

Code outside this package imports from here only. Inside, one job per module:

    row        LedgerRow: a row as a writer gives it, validated when made
    encoding   the canonical bytes of a row and its line; entry_hash, the key, head MAC
    head       the head file, which catches a truncated ledger
    chain      Ledger: append under the lock, verify, repair; reads as LedgerReader
    verify     the one-pass check of every line (from the file or any other store of
               them: check_lines), and the repair of a torn last line
    reading    LedgerReader: rows, recent, rows_of, history and recent outcomes
    index      the sqlite index that answers rows_of and history without a scan
    lines      reading a file of lines from the end, and by offset
"""

from orchestrator.storage.ledger.chain import Ledger, ledger_path
from orchestrator.storage.ledger.encoding import (
    FIELDS,
    LEDGER_KEY_ENV,
    ZERO_HASH,
    LedgerError,
    canonical,
    encode_row,
    head_mac,
    inputs_hash,
    key_from_env,
)
from orchestrator.storage.ledger.head import Head, read_head, write_head
from orchestrator.storage.ledger.index import (
    ActionHistory,
    LedgerIndex,
    RecordedOutcome,
    history_by_scan,
    recent_outcomes_by_scan,
)
from orchestrator.storage.ledger.reading import LedgerReader
from orchestrator.storage.ledger.row import LedgerRow, person_decision, utc_now
from orchestrator.storage.ledger.verify import RepairResult, VerifyResult, check_lines

__all__ = [
    "FIELDS",
    "LEDGER_KEY_ENV",
    "ZERO_HASH",
    "ActionHistory",
    "Head",
    "Ledger",
    "LedgerError",
    "LedgerIndex",
    "LedgerReader",
    "LedgerRow",
    "RecordedOutcome",
    "RepairResult",
    "VerifyResult",
    "canonical",
    "check_lines",
    "encode_row",
    "head_mac",
    "history_by_scan",
    "inputs_hash",
    "key_from_env",
    "ledger_path",
    "person_decision",
    "read_head",
    "recent_outcomes_by_scan",
    "utc_now",
    "write_head",
]
