# The gateway image: one build, three entry points (all-in-one, API, projector).
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci
COPY . .
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim
ENV NODE_ENV=production
# The container's own interface: the gateway listens on 127.0.0.1 unless told otherwise.
ENV HOST=0.0.0.0
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules node_modules
COPY --from=build /app/dist dist
# The npm scripts' build step: without TypeScript (pruned) and without tsconfig.build.json (never copied
# here: the step would take this for a checkout and refuse) it runs dist/ as built here.
COPY --from=build /app/scripts/build-dist.js scripts/build-dist.js
USER node
# Overridden per service in docker-compose.yml.
CMD ["node", "dist/apps/api/src/main.js"]
