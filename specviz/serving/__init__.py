"""What guards and serves the server (torch-free): the Runner protocol the UI calls (runner.py), this
server's limits (policy.py, space.py), Stop for every long event (stop.py), uploads (uploads.py), the
model status line (load_status.py), and for a class at once the Run tab's queue, identical requests
sharing one run and the wait estimate (run_queue.py, shared_run.py, wait_estimate.py, notices.py)."""
