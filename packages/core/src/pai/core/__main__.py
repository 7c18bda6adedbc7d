"""``python -m pai.core``: the ``pai`` command line, every command of it (plugins' included).

``python -m pai.core chat myapp.agents:coder`` is ``pai chat myapp.agents:coder``; use this form
when another package's ``pai`` console script (pydantic-ai-slim installs one) has replaced ours.
"""

from pai.core.cli import main

if __name__ == "__main__":
    main()
