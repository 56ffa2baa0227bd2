"""``python -m pwf`` runs the command line (``pwf call`` on its light path)."""

from pwf._entry import main

main()
