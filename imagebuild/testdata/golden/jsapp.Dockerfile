FROM langchain/langgraphjs-api:22

RUN apk add --no-cache git

ADD . /deps/jsapp

WORKDIR /deps/jsapp

RUN pnpm i

ENV LANGSERVE_GRAPHS='{"agent": "./src/agent.ts:graph"}'

WORKDIR /deps/jsapp

RUN (test ! -f /api/langgraph_api/js/build.mts && echo "Prebuild script not found, skipping") || tsx /api/langgraph_api/js/build.mts