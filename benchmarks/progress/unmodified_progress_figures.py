"""radt-ext's figures of the unmodified scripts' runs beside the scripts' own timings (their last stdout
line), as a markdown table: python3 benchmarks/progress/unmodified_progress_figures.py RESULTS."""
import os
import sys

from mlflow.tracking import MlflowClient

FIGURES = ("samples", "e2e_samples", "throughput_samples_per_s", "energy_per_sample_j", "e2e_energy_per_sample_j",
           "epochs", "first_epoch_time_s", "epoch_time_s", "first_epoch_energy_j", "epoch_energy_j", "active_s")


def main(results: str) -> None:
    client = MlflowClient()
    exp = client.get_experiment_by_name("unmodified")
    rows = ["| run | source | " + " | ".join(FIGURES) + " | the script's own |", "|" + " --- |" * (len(FIGURES) + 3)]
    for run in client.search_runs([exp.experiment_id], order_by=["attributes.start_time"]):
        name, m, tags = run.info.run_name, run.data.metrics, run.data.tags
        own = ""
        log = os.path.join(results, f"{name}.log")
        if os.path.exists(log):
            lines = [ln for ln in open(log).read().splitlines() if ln.startswith("{")]
            own = lines[-1] if lines else ""
        cells = [f"{m['summary/' + f]:.4g}" if "summary/" + f in m else "-" for f in FIGURES]
        rows.append(f"| {name} ({run.info.status}) | {tags.get('radt_ext.progress_source')} | " + " | ".join(cells)
                    + f" | {own} |")
        rate = client.get_metric_history(run.info.run_id, "progress/throughput_samples_per_s")
        rows.append(f"| | note: {tags.get('radt_ext.progress_note')}; samples/s timeline: {len(rate)} points; "
                    f"active source: {tags.get('radt_ext.active_source')} |" + " |" * (len(FIGURES) + 1))
    print("\n".join(rows))


if __name__ == "__main__":
    main(sys.argv[1])
