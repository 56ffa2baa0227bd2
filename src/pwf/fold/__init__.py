"""Folding a stored log into read models: replay, rebuild and the machinery they share.

The rooms, each named for its job:

* :mod:`pwf.fold.replay`: ``pwf replay``, a prefix of the log into a new database;
* :mod:`pwf.fold.rebuild`: ``pwf rebuild``, the whole log beside the live file, swapped in;
* :mod:`pwf.fold.workfile`: a fold into a throw-away work file, in chunks of seq;
* :mod:`pwf.fold.parallel`: a long fold split across two processes;
* :mod:`pwf.fold.decode`: typed events from stored rows, checking each chain link;
* :mod:`pwf.fold.scratchfiles`: the scratch files beside a database, held and swept.

This module imports nothing, so importing one room costs that room alone.
"""
