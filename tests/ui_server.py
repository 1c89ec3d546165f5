"""Launch the SpecViz Blocks on a free loopback port in this process (a server thread), for
gradio_client and browser tests. `python tests/ui_server.py [port]` serves the fake runner by hand."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gradio as gr  # noqa: E402

from app import MAX_SESSIONS, MAX_THREADS, MAX_UPLOAD, QUEUE_SIZE  # noqa: E402
from benchmarks.app_server import free_port  # noqa: E402
from specviz.assets import DemoTrace  # noqa: E402
from specviz.layout import build_demo  # noqa: E402
from specviz.serving.policy import Policy  # noqa: E402
from specviz.serving.runner import Runner  # noqa: E402
from specviz.theme import css, theme  # noqa: E402


PORT_ATTEMPTS = 5


def serve(runner: Runner, port: int | None = None, demo_trace: DemoTrace | None = None, policy: Policy = Policy(),
          max_size: int = QUEUE_SIZE, race: tuple | None = None) -> tuple[gr.Blocks, str]:
    """Start the app as app.py does, without blocking; returns the Blocks (call .close()) and its URL;
    `race` (a Race and its file name) replaces the recorded race of the Race tab."""
    demo = build_demo(runner, demo_trace=demo_trace, policy=policy, race=race, queue_size=max_size)
    demo.queue(default_concurrency_limit=1, max_size=max_size)
    for attempt in range(1, PORT_ATTEMPTS + 1):
        try:
            _, url, _ = demo.launch(server_name="127.0.0.1", server_port=port or free_port(), prevent_thread_lock=True,
                                    quiet=True, max_file_size=MAX_UPLOAD, state_session_capacity=MAX_SESSIONS,
                                    max_threads=MAX_THREADS,
                                    theme=theme(), css=css(), ssr_mode=False)
            return demo, url
        except OSError:          # another process took the free port between our probe and the bind
            if port is not None or attempt == PORT_ATTEMPTS:
                raise


if __name__ == "__main__":
    from fakes import FakeRunner
    from trace_factory import make_trace

    recorded = DemoTrace(make_trace([4, 2, 0, 4, 3, 1, 4, 4, 2, 0] * 3, sampling=True), "fake-sampled.json")
    demo, url = serve(FakeRunner(accepted=[4, 2, 0, 4, 3, 1, 4, 4, 2, 0] * 4, delay=0.05),
                      int(sys.argv[1]) if len(sys.argv) > 1 else 7861, demo_trace=recorded)
    print(url, flush=True)
    demo.block_thread()
