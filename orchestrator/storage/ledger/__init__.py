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

from orchestrator.storage.ledger.chain import Ledger as Ledger
from orchestrator.storage.ledger.chain import ledger_path as ledger_path
from orchestrator.storage.ledger.encoding import FIELDS as FIELDS
from orchestrator.storage.ledger.encoding import LEDGER_KEY_ENV as LEDGER_KEY_ENV
from orchestrator.storage.ledger.encoding import ZERO_HASH as ZERO_HASH
from orchestrator.storage.ledger.encoding import LedgerError as LedgerError
from orchestrator.storage.ledger.encoding import canonical as canonical
from orchestrator.storage.ledger.encoding import encode_row as encode_row
from orchestrator.storage.ledger.encoding import head_mac as head_mac
from orchestrator.storage.ledger.encoding import inputs_hash as inputs_hash
from orchestrator.storage.ledger.encoding import key_from_env as key_from_env
from orchestrator.storage.ledger.head import Head as Head
from orchestrator.storage.ledger.head import read_head as read_head
from orchestrator.storage.ledger.head import write_head as write_head
from orchestrator.storage.ledger.index import ActionHistory as ActionHistory
from orchestrator.storage.ledger.index import LedgerIndex as LedgerIndex
from orchestrator.storage.ledger.index import RecordedOutcome as RecordedOutcome
from orchestrator.storage.ledger.index import history_by_scan as history_by_scan
from orchestrator.storage.ledger.index import recent_outcomes_by_scan as recent_outcomes_by_scan
from orchestrator.storage.ledger.reading import LedgerReader as LedgerReader
from orchestrator.storage.ledger.row import LedgerRow as LedgerRow
from orchestrator.storage.ledger.row import person_decision as person_decision
from orchestrator.storage.ledger.row import utc_now as utc_now
from orchestrator.storage.ledger.verify import RepairResult as RepairResult
from orchestrator.storage.ledger.verify import VerifyResult as VerifyResult
from orchestrator.storage.ledger.verify import check_lines as check_lines
