// FHIR Bulk Data Access (v2) for the Horismos FHIR test server: `Group/[id]/$export` and
// `Patient/$export` with `Prefer: respond-async`, the status endpoint a client polls, the
// manifest, and one NDJSON file per resource type; and a token endpoint for SMART Backend
// Services (`client_credentials` with a signed `client_assertion`).
//
// Test-only simplifications, said here: the client assertion's claims are checked (iss = sub,
// aud = the token URL, exp in the future, a jti) but its signature is not verified against a
// registered key set; a job's files are built when it is kicked off, and the first poll answers
// 202 (in progress) before the second answers the manifest, so a client's polling is exercised.
// Every export request and file download needs a bearer token the token endpoint issued.

import { randomUUID } from 'node:crypto';

const PATIENT_TYPES = [
  'Patient',
  'AllergyIntolerance',
  'CarePlan',
  'Condition',
  'Encounter',
  'MedicationDispense',
  'MedicationRequest',
  'Observation',
  'Procedure',
];
const CLIENT_ASSERTION = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

export function bulkData({ base, repo, router, send, logRequest }) {
  const tokens = new Map(); // token -> expiry (ms)
  const jobs = new Map(); // job id -> { polls, manifest, files: Map(name -> text) }

  const fail = (res, status, code, text) =>
    send(res, status, { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code, diagnostics: text }] });

  function authorised(req) {
    const token = /^Bearer (.+)$/i.exec(req.headers.authorization ?? '')?.[1];
    const expiry = token && tokens.get(token);
    return Boolean(expiry && expiry > Date.now());
  }

  function claims(assertion) {
    const parts = (assertion ?? '').split('.');
    if (parts.length !== 3) {
      return null;
    }
    try {
      return JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8'));
    } catch {
      return null;
    }
  }

  async function token(req, res, text) {
    const form = new URLSearchParams(text);
    const origin = `http://${req.headers.host}`;
    const audience = `${origin}${base}/auth/token`;
    const c = claims(form.get('client_assertion'));
    const problem =
      form.get('grant_type') !== 'client_credentials'
        ? 'grant_type must be client_credentials'
        : form.get('client_assertion_type') !== CLIENT_ASSERTION
          ? `client_assertion_type must be ${CLIENT_ASSERTION}`
          : !c
            ? 'client_assertion is not a JWT'
            : !c.iss || c.iss !== c.sub
              ? 'the assertion iss and sub must both be the client id'
              : c.aud !== audience
                ? `the assertion aud must be ${audience}`
                : !(c.exp * 1000 > Date.now())
                  ? 'the assertion has expired'
                  : !c.jti
                    ? 'the assertion needs a jti'
                    : !(form.get('scope') ?? '').startsWith('system/')
                      ? 'scope must be system/… (backend services)'
                      : null;
    if (problem) {
      logRequest({ ...res.logEntry, status: 400 });
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'invalid_client', error_description: problem }));
      return;
    }
    const issued = randomUUID().replaceAll('-', '');
    tokens.set(issued, Date.now() + 300_000);
    send(res, 200, { access_token: issued, token_type: 'bearer', expires_in: 300, scope: form.get('scope') });
  }

  async function search(type, params) {
    const [, bundle] = await router.handleRequest(
      { method: 'GET', url: `/${type}?${params}`, pathname: '', body: undefined, params: {}, query: {}, headers: {} },
      repo
    );
    return (bundle?.entry ?? []).map((e) => e.resource);
  }

  async function build(patients, types, origin, jobId, request) {
    const files = new Map();
    const add = (resource) => {
      const lines = files.get(resource.resourceType) ?? [];
      lines.push(JSON.stringify(resource));
      files.set(resource.resourceType, lines);
    };
    const medications = new Set();
    for (const id of patients) {
      for (const type of PATIENT_TYPES.filter((t) => types.includes(t))) {
        if (type === 'Patient') {
          try {
            add(await repo.readResource('Patient', id));
          } catch {
            // a member that is not stored: nothing to export
          }
          continue;
        }
        for (const r of await search(type, `patient=Patient/${id}&_count=10000`)) {
          add(r);
          const ref = r.medicationReference?.reference;
          if (typeof ref === 'string' && ref.startsWith('Medication/')) {
            medications.add(ref.slice('Medication/'.length));
          }
        }
      }
    }
    if (types.includes('Medication')) {
      for (const id of medications) {
        try {
          add(await repo.readResource('Medication', id));
        } catch {
          // a reference to nothing stored
        }
      }
    }
    const texts = new Map([...files].map(([type, lines]) => [type, lines.join('\n') + '\n']));
    return {
      polls: 0,
      files: texts,
      manifest: {
        transactionTime: new Date().toISOString(),
        request,
        requiresAccessToken: true,
        output: [...texts.keys()].sort().map((type) => ({
          type,
          url: `${origin}${base}/$export-file/${jobId}/${type}.ndjson`,
          count: files.get(type).length,
        })),
        error: [],
      },
    };
  }

  // Answers a Bulk Data request (true), or leaves it to the FHIR router (false).
  return async function handleBulk(req, res, url, pathname, text) {
    if (req.method === 'POST' && pathname === '/auth/token') {
      await token(req, res, text);
      return true;
    }
    const kickOff = /^\/(?:Group\/([^/]+)|Patient)\/\$export$/.exec(pathname);
    const status = /^\/\$export-status\/([^/]+)$/.exec(pathname);
    const file = /^\/\$export-file\/([^/]+)\/([A-Za-z]+)\.ndjson$/.exec(pathname);
    if (!kickOff && !status && !file) {
      return false;
    }
    if (!authorised(req)) {
      fail(res, 401, 'login', 'a bearer token from the token endpoint is required');
      return true;
    }
    const origin = `http://${req.headers.host}`;
    if (kickOff) {
      if (req.method !== 'GET') {
        fail(res, 405, 'not-supported', 'kick off an export with GET');
      } else if (!/respond-async/.test(req.headers.prefer ?? '')) {
        fail(res, 400, 'invalid', 'an export needs Prefer: respond-async');
      } else {
        const types = url.searchParams.get('_type')?.split(',') ?? [...PATIENT_TYPES, 'Medication'];
        let patients;
        if (kickOff[1]) {
          let group;
          try {
            group = await repo.readResource('Group', kickOff[1]);
          } catch {
            fail(res, 404, 'not-found', `no Group ${kickOff[1]}`);
            return true;
          }
          patients = (group.member ?? [])
            .map((m) => m.entity?.reference ?? '')
            .filter((ref) => ref.startsWith('Patient/'))
            .map((ref) => ref.slice('Patient/'.length));
        } else {
          patients = (await search('Patient', '_count=10000')).map((p) => p.id);
        }
        const jobId = randomUUID();
        jobs.set(jobId, await build(patients, types, origin, jobId, `${origin}${req.url}`));
        send(res, 202, undefined, { 'content-location': `${origin}${base}/$export-status/${jobId}` });
      }
      return true;
    }
    if (status) {
      const job = jobs.get(status[1]);
      if (!job) {
        fail(res, 404, 'not-found', `no export job ${status[1]}`);
      } else if (req.method === 'DELETE') {
        jobs.delete(status[1]);
        send(res, 202, undefined);
      } else if (job.polls++ === 0) {
        send(res, 202, undefined, { 'x-progress': 'building the files', 'retry-after': '1' });
      } else {
        send(res, 200, job.manifest, { expires: new Date(Date.now() + 3_600_000).toUTCString() });
      }
      return true;
    }
    const job = jobs.get(file[1]);
    const body = job?.files.get(file[2]);
    if (body === undefined) {
      fail(res, 404, 'not-found', `no file ${file[2]}.ndjson in export ${file[1]}`);
      return true;
    }
    logRequest({ ...res.logEntry, status: 200 });
    res.writeHead(200, { 'content-type': 'application/fhir+ndjson' });
    res.end(body);
    return true;
  };
}
