FROM langchain/langgraphjs-api:20



ADD . /deps/jsmono

WORKDIR /deps/jsmono

RUN npm ci && npm run prep

ENV LANGSERVE_GRAPHS='{"agent": "./src/agent.ts:graph"}'

WORKDIR /deps/jsmono/apps/agent

RUN npm run build