FROM langchain/langgraph-api:3.11

RUN echo hello
ENV FOO=bar

RUN PYTHONDONTWRITEBYTECODE=1 uv pip install --system --no-cache-dir -c /api/constraints.txt langchain-openai>=0.3

# -- Installing local requirements --
ADD requirements.txt /deps/outer-pyapp/src/requirements.txt
RUN PYTHONDONTWRITEBYTECODE=1 uv pip install --system --no-cache-dir -c /api/constraints.txt -r /deps/outer-pyapp/src/requirements.txt
# -- End of local requirements install --

# -- Adding non-package dependency pyapp --
ADD . /deps/outer-pyapp/src
RUN set -ex && \
    for line in '[project]' \
                'name = "pyapp"' \
                'version = "0.1"' \
                '[tool.setuptools.package-data]' \
                '"*" = ["**/*"]' \
                '[build-system]' \
                'requires = ["setuptools>=61"]' \
                'build-backend = "setuptools.build_meta"'; do \
        echo "$line" >> /deps/outer-pyapp/pyproject.toml; \
    done
# -- End of non-package dependency pyapp --

# -- Installing all local dependencies --
RUN for dep in /deps/*; do             echo "Installing $dep";             if [ -d "$dep" ]; then                 echo "Installing $dep";                 (cd "$dep" && PYTHONDONTWRITEBYTECODE=1 uv pip install --system --no-cache-dir -c /api/constraints.txt -e .);             fi;         done
# -- End of local dependencies install --
ENV LANGGRAPH_STORE='{"index": {"dims": 1536, "embed": "openai:text-embedding-3-small", "ratio": 0.5, "big": 1e+20, "note": "caf\u00e9 \ud83d\ude00"}}'
ENV LANGGRAPH_AUTH='{"path": "/deps/outer-pyapp/src/src/agent/auth.py:auth"}'
ENV LANGGRAPH_HTTP='{"app": "/deps/outer-pyapp/src/src/agent/app.py:app", "cors": {"allow_origins": ["*"]}}'
ENV LANGGRAPH_CHECKPOINTER='{"ttl": {"strategy": "delete", "sweep_interval_minutes": 60}}'
ENV LANGSERVE_GRAPHS='{"agent": "/deps/outer-pyapp/src/src/agent/graph.py:graph", "other": "pkg.module:graph"}'



# -- Ensure user deps didn't inadvertently overwrite langgraph-api
RUN mkdir -p /api/langgraph_api /api/langgraph_runtime /api/langgraph_license && touch /api/langgraph_api/__init__.py /api/langgraph_runtime/__init__.py /api/langgraph_license/__init__.py
RUN PYTHONDONTWRITEBYTECODE=1 uv pip install --system --no-cache-dir --no-deps -e /api
# -- End of ensuring user deps didn't inadvertently overwrite langgraph-api --
# -- Removing build deps from the final image ~<:===~~~ --
RUN pip uninstall -y pip setuptools wheel
RUN rm -rf /usr/local/lib/python*/site-packages/pip* /usr/local/lib/python*/site-packages/setuptools* /usr/local/lib/python*/site-packages/wheel* && find /usr/local/bin -name "pip*" -delete || true
RUN rm -rf /usr/lib/python*/site-packages/pip* /usr/lib/python*/site-packages/setuptools* /usr/lib/python*/site-packages/wheel* && find /usr/bin -name "pip*" -delete || true
RUN uv pip uninstall --system pip setuptools wheel && rm /usr/bin/uv /usr/bin/uvx

WORKDIR /deps/outer-pyapp/src