"""How one server serves a class: the Run tab's queue, identical requests sharing one run, and the wait estimate."""
