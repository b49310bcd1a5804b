"""Kernel families, quant formats and references. `kernels.mmq(w_packed, qtype, x)` is the call a user
makes: the dispatcher (kernels/dispatch.py), imported on first use so that `import kernels` stays light."""


def __getattr__(name: str):
    if name == "mmq":
        from kernels.dispatch import mmq

        return mmq
    raise AttributeError(f"module 'kernels' has no attribute {name!r}")
