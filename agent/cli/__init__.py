"""The commands: run, dev state, doctor, trace, console, init, skills, send, store."""
