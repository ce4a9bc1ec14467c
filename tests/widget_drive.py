"""Build every widget of scalebook and drive each of its controls, under whatever ipywidgets this Python has.

Run by tests/test_widgets_colab.py in the Colab-like venv (ipywidgets 7.7.1) and in .venv (ipywidgets 8):
    python widget_drive.py  → one JSON line {ipywidgets, built: [...], driven: N, failures: [...]}
A widget builder is a public function of a scalebook_utils.views module annotated to return a
box (W.VBox/W.HBox) whose parameters all have defaults. Each control is moved to another value (Dropdown,
sliders, text boxes, checkboxes) or clicked (Button); a failure is an exception, an error captured in one of the
widget's Output areas, or a box that does not hold a `.snapshot()` PNG.
"""

import importlib
import inspect
import json
import pkgutil
import traceback

import matplotlib

matplotlib.use("agg")
import ipywidgets as W  # noqa: E402


def builders():
    import scalebook_utils.views as views

    names = [m.name for m in pkgutil.iter_modules(views.__path__) if not m.name.startswith("_")]
    for name in names:
        mod = importlib.import_module(f"scalebook_utils.views.{name}")
        for fname, f in inspect.getmembers(mod, inspect.isfunction):
            if f.__module__ != mod.__name__ or fname.startswith("_"):
                continue
            sig = inspect.signature(f)
            if not any(b in str(sig.return_annotation) for b in ("VBox", "HBox", "Box")):
                continue
            if all(
                p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values()
            ):
                yield f"{name}.{fname}", f


def descendants(w):
    yield w
    for c in getattr(w, "children", ()) or ():
        yield from descendants(c)


def _other(values, current):
    return next((v for v in values if v != current), None)


def drive(control) -> bool:
    """Move one control to another value (or click it); False when it has nothing to move to."""
    if isinstance(control, W.Button):
        control.click()
        return True
    if isinstance(control, W.Checkbox):
        control.value = not control.value
        return True
    if hasattr(control, "options") and not isinstance(control, W.SelectMultiple):
        values = [o[1] if isinstance(o, tuple) else o for o in control.options]
        new = _other(values[::-1], control.value)
        if new is None:
            return False
        control.value = new
        return True
    if isinstance(
        control,
        (W.IntSlider, W.FloatSlider, W.FloatLogSlider, W.BoundedIntText, W.BoundedFloatText, W.IntText, W.FloatText),
    ):
        lo, hi = getattr(control, "min", None), getattr(control, "max", None)
        new = (lo + hi) / 2 if lo is not None and hi is not None else control.value * 2 or 1
        if isinstance(control, (W.IntSlider, W.BoundedIntText, W.IntText)):
            new = int(new) if int(new) != control.value else int(hi if hi is not None else control.value + 1)
        control.value = new
        return True
    if isinstance(control, W.Text) and not isinstance(control, W.Textarea):
        control.value = control.value + " "
        return True
    return False


def errors_in_outputs(box):
    return [
        o for w in descendants(box) if isinstance(w, W.Output) for o in w.outputs if o.get("output_type") == "error"
    ]


def main():
    built, driven, failures = [], 0, []
    for name, f in builders():
        try:
            box = f()
            assert isinstance(box, W.Box), f"returned {type(box).__name__}"
            snap = getattr(box, "snapshot", None)
            assert callable(snap) and getattr(snap(), "data", b"")[:8] == b"\x89PNG\r\n\x1a\n", "no .snapshot() PNG"
            for control in list(descendants(box)):
                if control is not box and isinstance(control, W.DOMWidget) and drive(control):
                    driven += 1
            errs = errors_in_outputs(box)
            assert not errs, f"error in an Output: {errs[0].get('ename')}: {errs[0].get('evalue')}"
            built.append(name)
        except Exception as e:  # noqa: BLE001 - report every widget
            failures.append(f"{name}: {type(e).__name__}: {e} | {traceback.format_exc().splitlines()[-3].strip()}")
    print(json.dumps({"ipywidgets": W.__version__, "built": built, "driven": driven, "failures": failures}))


if __name__ == "__main__":
    main()
