.PHONY: quickstart test test-quick bench lint docs

quickstart:
	bash contrib/setup/quickstart.sh

test:
	bash contrib/setup/test.sh

# No broker, no Spark: what to run while working (the whole suite is `make test`), two at
# a time but for the tests that time the machine.
test-quick:
	bash contrib/setup/venv.sh
	.venv/bin/python -m pytest -q -n 3 -m "not servers and not spark and not slow and not browser and not alone"
	.venv/bin/python -m pytest -q -m "alone and not servers and not spark and not slow and not browser"

bench:
	bash contrib/setup/venv.sh
	.venv/bin/python contrib/bench/loopback.py

# The manual (contrib/docs), built strictly into build/docs.
docs:
	bash contrib/setup/venv.sh
	cd contrib/docs && ../../.venv/bin/mkdocs build --strict

lint:
	.venv/bin/ruff check harness modules contrib tests
