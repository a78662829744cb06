FROM langchain/langgraphjs-api:20



ADD . /deps/jsenv

WORKDIR /deps/jsenv

RUN npm i

ENV LANGSERVE_GRAPHS='{"first": "./src/first.ts:graph", "second": "./src/second.mts:makeGraph"}'

WORKDIR /deps/jsenv

RUN (test ! -f /api/langgraph_api/js/build.mts && echo "Prebuild script not found, skipping") || tsx /api/langgraph_api/js/build.mts