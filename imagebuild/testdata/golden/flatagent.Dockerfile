FROM langchain/langgraph-api:3.11



RUN /storage/install-node.sh

ADD pip.conf /pipconfig.txt

# -- Adding non-package dependency flatagent --
ADD . /deps/outer-flatagent/flatagent
RUN set -ex && \
    for line in '[project]' \
                'name = "flatagent"' \
                'version = "0.1"' \
                '[tool.setuptools.package-data]' \
                '"*" = ["**/*"]' \
                '[build-system]' \
                'requires = ["setuptools>=61"]' \
                'build-backend = "setuptools.build_meta"'; do \
        echo "$line" >> /deps/outer-flatagent/pyproject.toml; \
    done
# -- End of non-package dependency flatagent --

# -- Installing all local dependencies --
RUN for dep in /deps/*; do             echo "Installing $dep";             if [ -d "$dep" ]; then                 echo "Installing $dep";                 (cd "$dep" && PIP_CONFIG_FILE=/pipconfig.txt PYTHONDONTWRITEBYTECODE=1 uv pip install --system --no-cache-dir -c /api/constraints.txt -e .);             fi;         done
# -- End of local dependencies install --
ENV LANGGRAPH_UI='{"agent": "./ui.tsx"}'
ENV LANGSERVE_GRAPHS='{"agent": "/deps/outer-flatagent/flatagent/graph.py:graph"}'

# -- Installing JS dependencies --
ENV NODE_VERSION=20
WORKDIR /deps/outer-flatagent/flatagent
RUN yarn install --frozen-lockfile && tsx /api/langgraph_api/js/build.mts
# -- End of JS dependencies install --

# -- Ensure user deps didn't inadvertently overwrite langgraph-api
RUN mkdir -p /api/langgraph_api /api/langgraph_runtime /api/langgraph_license && touch /api/langgraph_api/__init__.py /api/langgraph_runtime/__init__.py /api/langgraph_license/__init__.py
RUN PYTHONDONTWRITEBYTECODE=1 uv pip install --system --no-cache-dir --no-deps -e /api
# -- End of ensuring user deps didn't inadvertently overwrite langgraph-api --
# -- Removing build deps from the final image ~<:===~~~ --
RUN rm /usr/bin/uv /usr/bin/uvx
# -- End of build deps removal --

WORKDIR /deps/outer-flatagent/flatagent