"""What a run is, before anything runs: the option table, worker groups, the run, roles as
facts (what each sends, receives and needs), per-thread templates; and their validation."""
