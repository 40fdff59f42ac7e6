# keras_slim: the two set-up commands are `make demo` and `make test`.
# Both create .venv on first use (Python 3.11, or python3): `make demo`
# installs the package as a user would (`pip install -e .`), `make test`
# with its dev extras; each install is redone when pyproject.toml changes.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
USER_STAMP := $(VENV)/.installed-user
# Two workers, for 2 cores. Budget: the whole `make test` under 10 minutes
# from a clean clone (CONTRIBUTING.md). Measured on 2 cores of an AMD
# EPYC (Zen 3): 14:33 and 18:10 in all before the JAX suite; 28:09 with
# it and the JAX services (tests/ 18:57, tests_jax/ 6:58, 46 min of CPU);
# 30:25 with the JAX in-step summaries and resume cases (tests/ 19:43,
# tests_jax/ 8:29, 49 min of CPU); 29:09 at 442ccd7 (tests/ 18:25,
# tests_jax/ 8:40, 51 min of CPU). On 2 cores of an Intel Xeon, where
# the same work takes about half the CPU: 14:53 at 00661f4 (tests/ 11:43,
# tests_jax/ 2:02 with its processes started as tests/'s and XLA's
# compilation cache shared by the run; 3:52 before; 26 min of CPU), and
# 13:49 at the policy bench's check (tests/ 10:26, tests_jax/ 2:03);
# 14:42 at 43bd52d (tests/ 11:04, tests_jax/ 2:24, 24.5 min of CPU),
# 17:05 at 450e2ca (tests/ 12:53 for the same tests: the machine's noise).
# Three workers were slower (CONTRIBUTING.md).
# Over budget: the tests' own work is 1,400 to 1,790 s of CPU on
# TensorFlow on the EPYC.
PYTEST_WORKERS ?= 2

.PHONY: demo test lint docs bench clean

$(USER_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e .
	touch $@

# --no-compile: pip would compile every installed module to bytecode
# (about 40 s of the install, TensorFlow's thousands of files); Python
# compiles and caches those a process imports, on first import.
# tf_keras (Keras 2): TF-Slim's nets need its legacy layers in the tests
# reference runs, and bench/ps_throughput.py compares with its fit.
# Without --no-deps it would pull in the full `tensorflow` wheel over
# tensorflow-cpu, which already provides the module.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e '.[dev,jax]'
	$(BIN)/python -m pip install --quiet --no-compile --no-deps 'tf_keras>=2.21,<2.22'
	touch $@ $(USER_STAMP)

# The main job: train_image_classifier on the digits, 2 clones on CPU
# devices, into ./train_digits, then eval_image_classifier on its
# checkpoint (into ./train_digits/eval). A second `make demo` resumes.
DEMO_FLAGS := --train_dir train_digits --num_clones 2 --clone_on_cpu \
	--max_number_of_steps 600 --optimizer adam --learning_rate 0.005 \
	--opt_epsilon 1e-7 --log_every_n_steps 100 --save_summaries_steps 20 \
	--trace_every_n_steps 600

demo: $(USER_STAMP)
	$(BIN)/keras-slim-train $(DEMO_FLAGS)
	$(BIN)/keras-slim-eval --checkpoint_path train_digits

lint: $(STAMP)
	$(BIN)/ruff check keras_slim tests tests_jax bench examples tools
	$(BIN)/ruff format --check keras_slim tests tests_jax bench examples tools

# Not --quiet: mkdocs 1.6 then stops counting warnings, and --strict
# passes a broken link.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# worksteal: an idle worker takes queued tests from a busy one, so the
# long subprocess tests do not leave one core idle at the end.
# tests/ runs on TensorFlow; tests_jax/ on Keras's JAX backend, in its
# own pytest process (the backend is fixed per process).
test: lint docs
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist worksteal --durations=15
	KERAS_BACKEND=jax $(BIN)/pytest tests_jax -q -n $(PYTEST_WORKERS) \
		--dist worksteal --durations=10

bench: $(STAMP)
	$(BIN)/python bench/vs_tf_slim_nets.py --chart docs/images/main_job.png
	$(BIN)/python bench/batch_norm_profile.py
	$(BIN)/python bench/policy_overhead.py
	$(BIN)/python bench/callbacks_overhead.py
	$(BIN)/python bench/ps_throughput.py
	$(BIN)/python bench/vs_tf_slim.py
	$(BIN)/python bench/vs_tf_slim.py --feed dataset --models CNN
	$(BIN)/python bench/step_floor.py
	$(BIN)/python bench/resume_overhead.py
	$(BIN)/python bench/input_pipeline.py
	$(BIN)/python bench/xla.py
	$(BIN)/python bench/step_profile.py
	$(BIN)/python bench/nets_load.py
	$(BIN)/python bench/fit_call.py
	$(BIN)/python bench/input_threads.py --input memory
	$(BIN)/python bench/input_threads.py --input images --processes 5
	$(BIN)/python bench/command_input.py
	$(BIN)/python bench/command_start.py --baseline c07c68e --rounds 7
	KERAS_BACKEND=jax $(BIN)/python bench/jax_policy_overhead.py
	KERAS_BACKEND=jax $(BIN)/python bench/jax_services_overhead.py
	KERAS_BACKEND=jax $(BIN)/python bench/jax_devices.py --image_size 64 \
		--batch_size 32 --steps 10

clean:
	rm -rf $(VENV) site .pytest_cache keras_slim.egg-info train_digits
