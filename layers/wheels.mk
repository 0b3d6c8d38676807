# Installing wheels for the Lambda platform (python3.13, arm64) in a sam build (BuildMethod: makefile), included
# by the Makefiles that need them: `$(INSTALL) -r requirements.txt --target DIR`. With uv when the build names it
# (make build and make test pass the one make installs into .venv): the same wheels as pip's, resolved and
# installed in about a second instead of half a minute; pip otherwise.
PYTHON ?= python3
UV ?=
ifneq ($(UV),)
INSTALL = $(UV) pip install --quiet --python-platform aarch64-manylinux_2_28 --python-version 3.13 --only-binary :all:
else
INSTALL = $(PYTHON) -m pip install --quiet --platform manylinux2014_aarch64 --platform manylinux_2_28_aarch64 \
	--implementation cp --only-binary=:all: --python-version 3.13
endif
