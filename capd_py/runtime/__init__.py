"""Container runtime: a Protocol, the docker SDK adapter and an in-memory fake."""
