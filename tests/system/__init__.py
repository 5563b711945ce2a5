"""The product as its users run it: its own processes (worker.py, starter.py, the installed wheel,
the README's commands), a real browser, servers started, restarted, killed or proxied here."""
