"""Running the load: schedules, worker threads and the roles they play, cells (the groups of
one process), child processes, the controller and the harness's own floor."""
