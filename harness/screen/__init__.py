"""What a person watches: the Textual live screen (a run in progress or replayed) and the
console lines and summary where there is no terminal."""
