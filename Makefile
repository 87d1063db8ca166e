.PHONY: quickstart test bench lint

quickstart:
	bash contrib/setup/quickstart.sh

test:
	bash contrib/setup/test.sh

bench:
	bash contrib/setup/venv.sh
	.venv/bin/python contrib/bench/loopback.py

lint:
	.venv/bin/ruff check harness modules contrib tests
