"""The run's plan, before anything runs: the option table, worker groups and the run's
settings, per-thread templates, rate steps and payloads, and their validation; `preview`
says the plan in lines (`harness run --check`)."""
