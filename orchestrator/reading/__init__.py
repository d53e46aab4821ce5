"""Failure reading: what a failed stage's or check's log, and the reports it wrote, say
went wrong. One typed reading (class, ranked evidence with the reason each line was kept,
the last error line, the tail) for the driver, the bundle, the console, the report and eval.

Layer: above domain and storage, below recovery and execution. Reads files; writes none
(the baseline store lives in ``storage``).
"""
