"""`mailmortem simulate`: write realistic mail-send logs of one incident kind, with their ground truth."""

from __future__ import annotations

from pathlib import Path

import click

from forensics.simulate.run import KINDS, SYNTAXES


@click.command()
@click.option("--kind", type=click.Choice(KINDS), required=True, help="Which incident the logs show.")
@click.option("--people", type=click.IntRange(min=20), required=True, help="How many people the CRM holds.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Directory to write (new, empty, or an earlier simulation: it is replaced).")
@click.option("--seed", type=int, default=0, show_default=True, help="Same seed, same files, byte for byte.")
@click.option("--syntax", type=click.Choice(SYNTAXES), default="logfmt", show_default=True,
              help="Log syntax; mixed gives each worker file a different one.")
@click.option("--single-file", is_flag=True, help="One combined log instead of one file per worker.")
@click.option("--gzip", "gz", is_flag=True, help="Write .gz files (truth.csv stays plain).")
@click.option("--thin", is_flag=True,
              help="Thin evidence: no claim/renew/release/expire/start/error records, no pid, no attempt.")
@click.option("--no-noise", is_flag=True, help="No blank lines, stack trace, access line or truncated line.")
def simulate(kind, people, out_dir, seed, syntax, single_file, gz, thin, no_noise):
    """Write simulated mail-send logs of one incident KIND, plus truth.csv and a README.md.

    truth.csv lists every duplicated person (campaign, step, recipient, kind, cause),
    computed from what was written, so `mailmortem diagnose` can be scored against it.
    An existing directory is only overwritten if it holds an earlier simulation.

    \b
    Examples:
      mailmortem simulate --kind lease-expiry --people 5000 --out sample_logs/lease-expiry/
      mailmortem simulate --kind mixed --people 2000 --out /tmp/case --syntax mixed --gzip
      mailmortem simulate --kind state-loss --people 800 --out /tmp/thin --thin --seed 7
      mailmortem simulate --kind retry --people 100000 --out /tmp/big --single-file --syntax jsonl
    """
    from forensics.simulate.run import simulate as run

    result = run(kind, people, out_dir, seed=seed, syntax=syntax, split_workers=not single_file, gzip=gz,
                 thin=thin, noise=not no_noise)
    _summary(result, out_dir)


def _summary(result, out_dir: Path) -> None:
    from forensics.textsafe import terminal_safe

    click.echo(f"Wrote {len(result.files)} log file(s) to {terminal_safe(out_dir)}: "
               f"{result.lines:,} lines, {result.sends:,} real sends")
    for path in result.files:
        click.echo(f"  {terminal_safe(path.name)}")
    click.echo(f"Ground truth: {terminal_safe(result.truth_path)} ({len(result.truth):,} duplicated people)")
    for kind, count in sorted(result.kinds.items()):
        click.echo(f"  {kind:<17} {count:>7,}")
