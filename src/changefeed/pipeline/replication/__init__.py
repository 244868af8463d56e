"""YDB asynchronous replication on the destination (issue 20): the apply of the source's
changefeed records into the replicas (``apply``)."""
