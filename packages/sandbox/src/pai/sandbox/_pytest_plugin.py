"""pai-sandbox's pytest plugin, loaded through its ``pytest11`` entry point.

It makes pytest rewrite the asserts of :mod:`pai.sandbox.testing`, so a conformance check that
fails in a provider's test run shows the values that differed (``assert ('ho\\n', '', 0) ==
('hi\\n', '', 0)``), not a bare ``AssertionError``. It has to run before the suite module is
imported, which is why it is a plugin and not code in the suite. Disable it with
``-p no:pai-sandbox``.
"""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("pai.sandbox.testing")
