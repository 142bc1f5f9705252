"""``enable_compilation_cache``: programs compiled in one process are read back in the next, into
the directory asked for, also after the process has compiled with another directory."""

import os
import subprocess
import sys

import pytest

from lowrank_jax import enable_compilation_cache

_RUN = """
import sys, jax, jax.numpy as jnp
from jax import monitoring
import lowrank_jax
events = []
monitoring.register_event_listener(lambda e, **k: events.append(e))
lowrank_jax.enable_compilation_cache(sys.argv[1])
jax.jit(lambda x: jnp.sin(x) @ x.T + 1.5)(jnp.ones((7, 3))).block_until_ready()
misses = sum(e.endswith("cache_misses") for e in events)
print(misses, sum(e.endswith("cache_hits") for e in events))
"""


def _misses_and_hits(directory) -> tuple[int, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    out = subprocess.run(
        [sys.executable, "-c", _RUN, str(directory)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    misses, hits = out.stdout.split()[-2:]
    return int(misses), int(hits)


def test_a_second_process_reads_the_programs_back(tmp_path):
    misses, hits = _misses_and_hits(tmp_path / "xla")
    assert misses >= 1 and hits == 0 and any((tmp_path / "xla").iterdir())
    assert _misses_and_hits(tmp_path / "xla") == (0, misses)  # every program from the cache
    assert _misses_and_hits(tmp_path / "other") == (misses, 0)  # another directory starts empty


def test_switching_directories_in_a_process_takes_effect(tmp_path):
    code = (
        "import sys, jax, jax.numpy as jnp, lowrank_jax\n"
        "lowrank_jax.enable_compilation_cache(sys.argv[1] + '/a')\n"
        "jax.jit(lambda x: x + 1)(jnp.ones(3)).block_until_ready()\n"
        "lowrank_jax.enable_compilation_cache(sys.argv[1] + '/b')\n"
        "jax.jit(lambda x: x * 3 - 2)(jnp.ones(4)).block_until_ready()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, check=True)
    assert any((tmp_path / "a").iterdir()) and any((tmp_path / "b").iterdir())


def test_refuses_what_is_not_a_path():
    with pytest.raises(TypeError, match="directory must be a path"):
        enable_compilation_cache(3)
