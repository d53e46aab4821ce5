"""Batches of tickets: the queue run in this process, or over N worker processes; what
they report. A distributed executor (a queue of tasks) belongs here too."""
