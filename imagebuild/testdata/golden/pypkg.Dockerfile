FROM langchain/langgraph-api:3.12-wolfi



# -- Adding local package . --
ADD . /deps/pypkg
# -- End of local package . --

# -- Installing all local dependencies --
RUN for dep in /deps/*; do             echo "Installing $dep";             if [ -d "$dep" ]; then                 echo "Installing $dep";                 (cd "$dep" && PYTHONDONTWRITEBYTECODE=1 pip install --no-cache-dir -c /api/constraints.txt -e .);             fi;         done
# -- End of local dependencies install --
ENV LANGSERVE_GRAPHS='{"agent": {"path": "/deps/pypkg/mypkg/graph.py:graph", "description": "the agent"}}'



# -- Ensure user deps didn't inadvertently overwrite langgraph-api
RUN mkdir -p /api/langgraph_api /api/langgraph_runtime /api/langgraph_license && touch /api/langgraph_api/__init__.py /api/langgraph_runtime/__init__.py /api/langgraph_license/__init__.py
RUN PYTHONDONTWRITEBYTECODE=1 pip install --no-cache-dir --no-deps -e /api
# -- End of ensuring user deps didn't inadvertently overwrite langgraph-api --
# -- Removing build deps from the final image ~<:===~~~ --
RUN pip uninstall -y setuptools wheel
RUN rm -rf /usr/local/lib/python*/site-packages/setuptools* /usr/local/lib/python*/site-packages/wheel*
RUN rm -rf /usr/lib/python*/site-packages/setuptools* /usr/lib/python*/site-packages/wheel*

WORKDIR /deps/pypkg