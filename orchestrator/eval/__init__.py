"""``orchestrator eval``: how well the deterministic layers (and, live, the model) decide,
measured over a labelled corpus of real tools' failures.

    corpus.py   the corpus on disk: one directory per case, ``log.txt`` + ``label.json``
    layers.py   the deterministic layers as a case meets them: class, precheck, bundle
    offline.py  one result per case and the summary (accuracy, recall, tokens)
    live.py     the model asked about the cases that warrant it, under a cost cap
    report.py   the table and the JSON
"""
