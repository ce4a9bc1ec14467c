"""The ONE place where scalebook deals with differences between JAX versions.

Supported: jax 0.4.35 (the oldest, tested by `make test-oldest-jax`) up to 0.10.x (tested with
0.10.2; tests/test_jaxlab.py also passed on jax 0.11.2 with CUDA, on an H200). Nothing else in
scalebook branches on the JAX version; `jaxlab` calls these helpers.

Differences handled here (oldest behaviour → newest behaviour):

1. `Compiled.cost_analysis()` returns a list with one dict per program (≤ 0.4.x) → a single dict
   (newer). `cost_analysis_dict` always gives one flat `dict[str, float]` ({} when XLA has none).
2. Simulated CPU devices: `jax.config.update("jax_num_cpu_devices", n)` exists only in newer
   versions; older ones read `XLA_FLAGS=--xla_force_host_platform_device_count=n` when the CPU
   backend starts. `set_cpu_device_count` uses the config option when present, the flag otherwise,
   and refuses (RuntimeError) once the backends are initialised with a different count.
3. `jax.make_mesh` takes no `axis_types` (≤ 0.4.x, axes are implicitly "Auto"); newer versions
   default to *Explicit* axes, under which textbook-style auto-sharded code fails. `make_mesh_auto`
   passes `axis_types=(AxisType.Auto,) * n` whenever `jax.sharding.AxisType` exists.
4. shard_map: `jax.experimental.shard_map.shard_map(f, mesh, in_specs, out_specs, check_rep=)`
   (old; deprecated later) → `jax.shard_map(f, mesh=, in_specs=, out_specs=, check_vma=)` (new).
   `shard_map(f, mesh=, in_specs=, out_specs=, check=)` picks the function and the keyword.
5. `lax.all_gather` into a replicated out_spec: new versions need `to="invarying"` (the result is
   the same on every device); old versions have no `to`, and their `check_rep` checker does not
   know the result is replicated, so it rejects such code. `all_gather_invariant` adds `to=` where
   it exists, and `shard_map(check=None)` (the default) turns the old checker off.
6. Setting a mesh as context: `with mesh:` (old) → `jax.sharding.use_mesh` (0.5/0.6) →
   `jax.set_mesh` (new; `use_mesh` is gone). `use_mesh(mesh)` returns the right context manager.
7. `jax.block_until_ready(tree)` is used when present; otherwise every leaf's
   `.block_until_ready()` is called (`block_until_ready`).
8. "Are the backends initialised yet?" lives in a private module (`jax._src.xla_bridge`) whose
   helpers changed over time; `backends_initialized` probes it defensively.
9. The size of a mesh axis inside shard_map: `lax.axis_size(name)` (newer versions) → older ones count
   the devices with `lax.psum(1, name)`. `axis_size(name)` uses whichever exists.
10. Explicit sharding (sharding in types, book ch. 10) needs `jax.sharding.AxisType`, `jax.typeof` and
   `jax.sharding.reshard` (JAX ≥ 0.7); `explicit_sharding_missing()` names the ones this JAX lacks.
11. Cross-process CPU collectives (gloo) need the `jax_cpu_collectives_implementation` config option
   (JAX ≥ 0.4.27); `has_cpu_collectives_option()` says whether this JAX has it.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import warnings

import jax

#: Supported JAX range: the oldest version tested and the newest version tested.
SUPPORTED_JAX = (">=0.4.35", "tested up to 0.10.2")
MIN_JAX = (0, 4, 35)
NEWEST_TESTED_JAX = (0, 10, 2)

_FORCE_FLAG = "--xla_force_host_platform_device_count"


def parse_version(v: str) -> tuple[int, ...]:
    """'0.4.35' → (0, 4, 35); '0.5.0.dev20250101' → (0, 5, 0); extra suffixes are ignored."""
    parts = []
    for piece in str(v).split(".")[:3]:
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
    return tuple(parts)


JAX_VERSION: tuple[int, ...] = parse_version(jax.__version__)


def check_jax_version(version: str | None = None) -> bool:
    """True when `version` (default: the installed one) is in the supported range; warns when too old."""
    v = parse_version(version or jax.__version__)
    if v < MIN_JAX:
        warnings.warn(
            f"scalebook supports jax {SUPPORTED_JAX[0]} ({SUPPORTED_JAX[1]}); "
            f"found {version or jax.__version__}. Some helpers may fail.",
            RuntimeWarning,
            stacklevel=2,
        )
        return False
    return True


# --- 1. cost analysis ------------------------------------------------------------------------------


def cost_analysis_dict(compiled) -> dict[str, float]:
    """Flatten `compiled.cost_analysis()` to one dict of floats.

    Old JAX returns `[dict]` (one per HLO module; a jitted function has one), new JAX a `dict`;
    either may be None or empty when the backend gives no estimate. Non-numeric values are dropped.
    Several modules (never seen for one jitted function) are summed key by key.
    """
    raw = compiled.cost_analysis() if hasattr(compiled, "cost_analysis") else compiled
    if raw is None:
        return {}
    dicts = [raw] if isinstance(raw, dict) else [d for d in raw if d]
    out: dict[str, float] = {}
    for d in dicts:
        for k, v in d.items():
            try:
                out[k] = out.get(k, 0.0) + float(v)
            except (TypeError, ValueError):
                continue
    return out


# --- 2. simulated CPU devices ---------------------------------------------------------------------


def has_num_cpu_devices_option() -> bool:
    """True when this JAX has the `jax_num_cpu_devices` config option (newer versions)."""
    try:
        return "jax_num_cpu_devices" in jax.config.values
    except AttributeError:  # pragma: no cover - very old config object
        return hasattr(jax.config, "jax_num_cpu_devices")


def backends_initialized() -> bool:
    """True once JAX has created its backends (after the first jax.devices() or computation)."""
    try:
        from jax._src import xla_bridge as xb
    except ImportError:  # pragma: no cover
        return False
    fn = getattr(xb, "backends_are_initialized", None)
    if fn is not None:
        try:
            return bool(fn())
        except Exception:  # pragma: no cover
            pass
    return bool(getattr(xb, "_backends", {}))  # pragma: no cover


def _set_xla_flag(n: int) -> None:
    flags = os.environ.get("XLA_FLAGS", "")
    flags = re.sub(rf"{_FORCE_FLAG}=\S*", "", flags).strip()
    os.environ["XLA_FLAGS"] = f"{flags} {_FORCE_FLAG}={n}".strip()


def cpu_device_count() -> int:
    """Number of CPU devices JAX exposes (initialises the backends)."""
    return len(jax.devices("cpu"))


def set_cpu_device_count(n: int) -> None:
    """Ask JAX for `n` CPU devices; must run before JAX initialises its backends.

    New JAX: `jax.config.update("jax_num_cpu_devices", n)`. Old JAX: the XLA flag
    `--xla_force_host_platform_device_count=n` in the XLA_FLAGS environment variable, which the CPU
    backend reads when it starts (the environment variable is left alone on new JAX, so child processes
    are not affected). If the backends are already up with a different count, raises RuntimeError
    (restarting the kernel is the only fix).
    """
    n = int(n)
    if n < 1:
        raise ValueError(f"n must be a positive number of devices, got {n}")
    if backends_initialized():
        have = cpu_device_count()
        if have != n:
            raise RuntimeError(
                f"JAX is already running with {have} CPU device(s), so it cannot switch to {n}. "
                "Restart the kernel (Kernel → Restart) and run the setup cell first, before anything else "
                "uses JAX."
            )
        return
    if has_num_cpu_devices_option():
        jax.config.update("jax_num_cpu_devices", n)
    else:
        _set_xla_flag(n)


# --- 3. meshes ------------------------------------------------------------------------------------


def has_axis_types() -> bool:
    """True when this JAX has `jax.sharding.AxisType` (explicit/auto mesh axes)."""
    return hasattr(jax.sharding, "AxisType")


def make_mesh_auto(axis_shapes, axis_names, *, devices=None):
    """`jax.make_mesh` with every axis of type Auto (the behaviour the book's sharding code assumes).

    New JAX defaults to Explicit axes; we pass `axis_types=(AxisType.Auto,) * len(axis_names)`.
    Old JAX has no axis types (every axis behaves as Auto) and gets no such argument.
    """
    axis_shapes, axis_names = tuple(axis_shapes), tuple(axis_names)
    kwargs = {} if devices is None else {"devices": devices}
    make = getattr(jax, "make_mesh", None)
    if make is None:  # pragma: no cover - older than supported
        from jax.experimental import mesh_utils

        devs = mesh_utils.create_device_mesh(axis_shapes, devices=devices)
        return jax.sharding.Mesh(devs, axis_names)
    if has_axis_types() and "axis_types" in inspect.signature(make).parameters:
        auto = jax.sharding.AxisType.Auto
        try:
            return make(axis_shapes, axis_names, axis_types=(auto,) * len(axis_names), **kwargs)
        except TypeError:  # pragma: no cover - transitional versions took a dict of types
            pass
    return make(axis_shapes, axis_names, **kwargs)


@contextlib.contextmanager
def use_mesh(mesh):
    """Context manager that makes `mesh` the current mesh: jax.set_mesh / jax.sharding.use_mesh / `with mesh`."""
    if hasattr(jax, "set_mesh"):
        ctx = jax.set_mesh(mesh)
    elif hasattr(jax.sharding, "use_mesh"):  # pragma: no cover - 0.5/0.6
        ctx = jax.sharding.use_mesh(mesh)
    else:
        ctx = mesh
    with ctx:
        yield mesh


# --- 4. shard_map ---------------------------------------------------------------------------------


def _shard_map_impl():
    """(function, name of its replication-check keyword)."""
    fn = getattr(jax, "shard_map", None)
    if fn is None:
        from jax.experimental.shard_map import shard_map as fn
    params = inspect.signature(fn).parameters
    key = "check_vma" if "check_vma" in params else "check_rep"
    return fn, key


def shard_map(f, *, mesh, in_specs, out_specs, check: bool | None = None):
    """shard_map that runs on every supported JAX.

    New: `jax.shard_map(f, mesh=, in_specs=, out_specs=, check_vma=check)`.
    Old: `jax.experimental.shard_map.shard_map(f, mesh, in_specs, out_specs, check_rep=check)`.
    `check` is the replication check (varying-manual-axes check in new JAX). None (the default)
    means "on where it understands the book's collectives": on with `check_vma`, off with the old
    `check_rep`, which cannot see that an all_gather result is replicated (difference 5) and so
    rejects correct textbook code. The check only guards against wrong out_specs; results are the same.
    """
    fn, key = _shard_map_impl()
    if check is None:
        check = key == "check_vma"
    return fn(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **{key: check})


def all_gather_invariant(x, axis_name, *, axis: int = 0, tiled: bool = False):
    """`lax.all_gather` whose result counts as replicated over `axis_name` (for a replicated out_spec).

    New JAX (0.8+) tracks whether values vary across mesh axes and needs `to="invarying"`; JAX 0.6–0.7
    (e.g. Colab's TPU runtime, 0.7.2) has the same check but spells it `lax.all_gather_invariant`; old
    JAX has neither (its checker is off under `shard_map(check=None)`, see difference 5).
    """
    from jax import lax

    if "to" in inspect.signature(lax.all_gather).parameters:
        return lax.all_gather(x, axis_name, axis=axis, tiled=tiled, to="invarying")
    if hasattr(lax, "all_gather_invariant"):
        return lax.all_gather_invariant(x, axis_name, axis=axis, tiled=tiled)
    return lax.all_gather(x, axis_name, axis=axis, tiled=tiled)


def axis_size(axis_name) -> int:
    """Devices along a mesh axis inside shard_map (difference 9): `lax.axis_size`, or `psum(1)` on old JAX."""
    from jax import lax

    return int(lax.axis_size(axis_name)) if hasattr(lax, "axis_size") else int(lax.psum(1, axis_name))


# --- 10. explicit sharding ------------------------------------------------------------------------


def explicit_sharding_missing() -> list[str]:
    """The APIs of explicit sharding (difference 10) this JAX lacks, by name; [] when it has them all."""
    have = {
        "jax.sharding.AxisType": has_axis_types(),
        "jax.typeof": hasattr(jax, "typeof"),
        "jax.sharding.reshard": hasattr(jax.sharding, "reshard"),
    }
    return [name for name, ok in have.items() if not ok]


# --- 11. cross-process CPU collectives ------------------------------------------------------------


def has_cpu_collectives_option() -> bool:
    """True when this JAX can pick gloo for CPU collectives across processes (difference 11)."""
    return "jax_cpu_collectives_implementation" in jax.config.values


# --- 7. blocking ----------------------------------------------------------------------------------


def block_until_ready(tree):
    """Wait for every array in a pytree; returns the tree. Non-array leaves are ignored."""
    fn = getattr(jax, "block_until_ready", None)
    if fn is not None:
        return fn(tree)
    for leaf in jax.tree_util.tree_leaves(tree):  # pragma: no cover - older than supported
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return tree


__all__ = [
    "SUPPORTED_JAX",
    "MIN_JAX",
    "NEWEST_TESTED_JAX",
    "JAX_VERSION",
    "parse_version",
    "check_jax_version",
    "cost_analysis_dict",
    "has_num_cpu_devices_option",
    "backends_initialized",
    "cpu_device_count",
    "set_cpu_device_count",
    "has_axis_types",
    "make_mesh_auto",
    "use_mesh",
    "shard_map",
    "all_gather_invariant",
    "axis_size",
    "explicit_sharding_missing",
    "has_cpu_collectives_option",
    "block_until_ready",
]
