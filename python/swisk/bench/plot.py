"""python -m swisk bench --plot FILE.png: speed-up and peak-memory ratio against the reference per row
(matplotlib, an optional dependency: pip install "swisk[plot]")."""
from __future__ import annotations


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _label(r: dict) -> str:
    extra = [r["dtype"]] + ([r["route"]] if r.get("route") else []) + [f"t{r['threads']}"]
    return f"{r['op']} {r['case']} [{', '.join(extra)}]"


def plot(rows: list, path: str, title: str = "") -> None:
    """Two panels, one bar per row: forward+backward speed-up (forward where the row has no backward)
    and the swisk/reference peak-memory ratio, both on log scales with a line at 1."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r.get("fwdbwd_speedup") or r.get("fwd_speedup")]
    labels = [_label(r) for r in rows]
    speed = [r.get("fwdbwd_speedup") or r.get("fwd_speedup") for r in rows]
    memory = [r.get("fwdbwd_memory_ratio") or r.get("fwd_memory_ratio") or 1.0 for r in rows]
    height = max(3.0, 0.28 * len(rows) + 1.2)
    fig, (a, b) = plt.subplots(1, 2, figsize=(14, height), sharey=True)
    y = range(len(rows))
    def from_one(ax, values, colors):  # bars from 1 to the value (left of 1: below the reference)
        ax.barh(y, [abs(v - 1) for v in values], left=[min(1.0, v) for v in values], color=colors)

    from_one(a, speed, ["tab:green" if s >= 1 else "tab:red" for s in speed])
    a.set_xscale("log")
    a.axvline(1, color="k", lw=0.8)
    a.set_xlabel("speed-up against the reference (fwd+bwd; fwd where no backward)")
    from_one(b, memory, ["tab:blue" if m <= 1 else "tab:orange" for m in memory])
    b.set_xscale("log")
    b.axvline(1, color="k", lw=0.8)
    b.set_xlabel("peak memory, swisk / reference")
    a.set_yticks(list(y), labels, fontsize=7)
    a.invert_yaxis()
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
