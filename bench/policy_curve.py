"""The failure policy's schedule beside Routemaster's health curve, as the defaults make
them: the delay after each failure in a row, and the attempts a dead endpoint gets in
its first 10 minutes. Computed from the formulas (deliver_fail.lua; Routemaster's
`MAX_BACKOFF x 2^(-hp/10)`), jitter at its least (x1), so the figures are the most
attempts each allows; bench.policy measures them on real processes.

    .venv/bin/python -m bench.policy_curve     # prints the table, writes docs/failure-policy.png
"""

from __future__ import annotations

from pathlib import Path

from config.settings import Settings

OUT = Path(__file__).resolve().parent.parent / "docs" / "failure-policy.png"
FAILURES = 55
WINDOW_S = 600.0


def busbar_delay_ms(settings: Settings, n: int) -> float:
    """The delay after the n-th failure in a row (n >= 1), jitter x1."""
    if n >= settings.circuit_failures:
        return float(settings.circuit_probe_ms)
    if settings.retry_lone_ms and n == 1:
        return float(settings.retry_lone_ms)
    doublings = n - 2 if settings.retry_lone_ms else n - 1
    return float(min(settings.max_backoff_ms, settings.retry_first_ms * 2**doublings))


def routemaster_delay_ms(settings: Settings, n: int) -> float:
    """Routemaster's curve: health falls by the damage rate a failure from 100."""
    hp = max(0, 100 + settings.hp_damage_rate * n)
    return settings.max_backoff_ms * 2 ** (-hp / 10)


def attempt_times(window_s: float, delay_ms: object, settings: Settings) -> list[float]:
    """When an endpoint that fails at once is tried, s from its first attempt."""
    at, times = 0.0, []
    while at <= window_s:
        times.append(at)
        at += delay_ms(settings, len(times)) / 1000  # type: ignore[operator]
    return times


def plot(settings: Settings, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = list(range(1, FAILURES + 1))
    curves = (
        ("busbar: from the first failure, then the circuit's probes", busbar_delay_ms),
        ("Routemaster: MAX_BACKOFF x 2^(-hp/10)", routemaster_delay_ms),
    )
    fig, (delays, tries) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=100)
    for label, curve in curves:
        delays.step(n, [curve(settings, i) / 1000 for i in n], where="post", label=label)
        times = attempt_times(WINDOW_S, curve, settings)
        tries.step([t / 60 for t in times], range(1, len(times) + 1), where="post", label=label)
    delays.axvline(settings.circuit_failures, color="grey", linestyle=":", linewidth=1)
    delays.annotate("circuit opens", (settings.circuit_failures + 0.6, 0.02), color="grey")
    delays.set_yscale("log")
    delays.set_xlabel("failures in a row")
    delays.set_ylabel("delay before the next attempt, s")
    delays.set_title("Retry delay (defaults, jitter x1)")
    tries.set_xlabel("minutes since the endpoint died")
    tries.set_ylabel("attempts so far")
    tries.set_title("Attempts on an endpoint that fails at once")
    for ax in (delays, tries):
        ax.grid(True, which="both", alpha=0.3)
    tries.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    settings = Settings()
    print("failures in a row: delay busbar / Routemaster, s")
    for i in (1, 2, 3, 4, 5, 10, 20, 30, 40, 50):
        print(
            f"{i:>3}: {busbar_delay_ms(settings, i) / 1000:8.2f} "
            f"{routemaster_delay_ms(settings, i) / 1000:8.3f}"
        )
    print(
        f"attempts in {WINDOW_S / 60:.0f} min for an endpoint failing at once: busbar "
        f"{len(attempt_times(WINDOW_S, busbar_delay_ms, settings))}, Routemaster "
        f"{len(attempt_times(WINDOW_S, routemaster_delay_ms, settings))}; in the first "
        f"minute: busbar {len(attempt_times(60, busbar_delay_ms, settings))}, Routemaster "
        f"{len(attempt_times(60, routemaster_delay_ms, settings))}"
    )
    plot(settings, OUT)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
