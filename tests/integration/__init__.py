"""Sessions against a real Temporal dev server (one per test run) with in-process workers, the
openai client against a loopback fake, the HTTP API in process. A test here that needs no
server (a replay of the corpus, a card rendered) is in the fast tier too."""
