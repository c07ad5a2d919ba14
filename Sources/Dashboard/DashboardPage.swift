/// `GET /dashboard` (docs/dashboard.md): one self-contained HTML page — inline CSS, inline script, inline SVG charts,
/// nothing fetched from anywhere but `/dashboard.json` on the same origin. The JSON of the moment is embedded
/// so the page renders without a second request; it then refreshes itself every 30 seconds.
package enum DashboardPage {
    /// Headers for both dashboard answers: never cached (the numbers change every minute), and a CSP that
    /// forbids any other origin, so the page works offline and cannot be made to leak anything.
    package static let headers = "Cache-Control: no-store\r\n"
        + "Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        + "img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\n"
        + "X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n"

    /// The page with `json` embedded. `<` is escaped as `\u003c` (valid JSON, and no `</script>` can end the
    /// data block early whatever a route or App ID is called).
    package static func render(json: String) -> String {
        let safe = json.replacingOccurrences(of: "<", with: "\\u003c")
        return template.replacingOccurrences(of: "__DASHBOARD_JSON__", with: safe)
    }

    static let template = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>AppCheck Gateway · enforcement dashboard</title>
<style>
:root{--bg:#f6f7f9;--card:#fff;--ink:#1b1f24;--muted:#5d6670;--line:#d9dde3;
--verified:#2e7d32;--outdated_client:#e69500;--unknown_origin:#7b4bb7;--invalid:#c62828;--reused:#4f6d8f;
--ready:#2e7d32;--wait:#b26a00;--investigate:#c62828;--nodata:#6b7580}
@media (prefers-color-scheme:dark){:root{--bg:#14171b;--card:#1d2127;--ink:#e8eaed;--muted:#9aa3ad;--line:#343a42;
--verified:#5cb860;--outdated_client:#f0b429;--unknown_origin:#a57fe0;--invalid:#ef5350;--reused:#7f9cc0;
--ready:#5cb860;--wait:#f0b429;--investigate:#ef5350;--nodata:#9aa3ad}}
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:var(--bg);color:var(--ink)}
header{padding:12px 16px;border-bottom:1px solid var(--line);background:var(--card);display:flex;flex-wrap:wrap;gap:8px 16px;align-items:center}
h1{font-size:17px;margin:0;flex:1 1 auto}
h2{font-size:16px;margin:0 0 8px}
h3{font-size:13px;margin:12px 0 4px;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
main{padding:12px 16px;max-width:1200px;margin:0 auto}
.tabs button{font:inherit;padding:5px 12px;border:1px solid var(--line);background:var(--card);color:var(--ink);cursor:pointer}
.tabs button:first-child{border-radius:6px 0 0 6px}.tabs button:last-child{border-radius:0 6px 6px 0}
.tabs button[aria-pressed=true]{background:var(--ink);color:var(--bg)}
#updated{color:var(--muted);font-size:13px}
#updated.stale{color:var(--investigate);font-weight:600}
.status{display:grid;grid-template-columns:repeat(auto-fit,minmax(220px,1fr));gap:8px;margin-bottom:12px}
.status div{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:8px 10px;font-size:13px}
.status b{display:block;font-size:12px;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
.bad{color:var(--investigate);font-weight:600}.ok{color:var(--ready);font-weight:600}
.scroll{overflow-x:auto;background:var(--card);border:1px solid var(--line);border-radius:8px;margin-bottom:16px}
table{border-collapse:collapse;width:100%;font-size:14px}
th,td{padding:7px 10px;text-align:right;border-bottom:1px solid var(--line);white-space:nowrap}
th{font-size:12px;color:var(--muted);font-weight:600}
th:nth-child(-n+3),td:nth-child(-n+3),th:last-child{text-align:left}
td.why{text-align:left;white-space:normal;min-width:220px;color:var(--muted);font-size:13px}
tr:last-child td{border-bottom:0}
.share{display:block;font-size:12px;color:var(--muted)}
.pill{display:inline-block;padding:2px 9px;border-radius:999px;color:#fff;font-weight:700;font-size:13px}
.v-ready{background:var(--ready)}.v-wait{background:var(--wait)}.v-investigate{background:var(--investigate)}.v-nodata{background:var(--nodata)}
.mode{font-size:12px;padding:1px 7px;border-radius:4px;border:1px solid var(--line)}
.mode-enforce{border-color:var(--ink);font-weight:700}
.routes{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,520px),1fr));gap:12px}
.route{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px}
.route header{all:unset;display:flex;gap:8px;align-items:center;flex-wrap:wrap;margin-bottom:6px}
svg{width:100%;height:auto;display:block}
.legend{display:flex;flex-wrap:wrap;gap:4px 12px;font-size:12px;color:var(--muted);margin:4px 0}
.legend i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:-1px}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:12px}
@media (max-width:560px){.cols{grid-template-columns:1fr}body{font-size:14px}main{padding:8px}th,td{padding:6px}th:nth-child(3),td:nth-child(3){display:none}}
ol,ul{margin:0;padding-left:0;list-style:none;font-size:13px}
li{display:flex;justify-content:space-between;gap:8px;border-bottom:1px dotted var(--line);padding:2px 0}
li span:first-child{overflow-wrap:anywhere}
ul.apps li{flex-wrap:wrap}
ul.apps li span:first-child{white-space:nowrap;overflow:hidden;text-overflow:ellipsis;max-width:100%}
#issuer-risk{grid-column:1/-1}
.app-id{white-space:nowrap}
.muted{color:var(--muted)}
.empty{color:var(--muted);font-size:13px}
p.dpop{margin:4px 0;font-size:13px}
footer{color:var(--muted);font-size:12px;padding:8px 16px 24px;max-width:1200px;margin:0 auto}
</style>
</head>
<body>
<header>
<h1>AppCheck Gateway · can I turn enforcement on yet?</h1>
<div class="tabs" role="group" aria-label="window">
<button data-window="hour">Last hour</button><button data-window="day">Last day</button><button data-window="week">Last week</button>
</div>
<span id="updated"></span>
</header>
<main>
<div class="status" id="status"></div>
<div class="scroll"><table id="routes-table"><thead><tr>
<th>Verdict</th><th>Route</th><th>Mode</th><th>Requests</th><th>Verified</th><th>Outdated client</th><th>Unknown origin</th><th>Invalid</th><th>Reused</th><th title="verified requests with a key-bound token and its DPoP proof">Bound (DPoP)</th><th>Why</th>
</tr></thead><tbody></tbody></table></div>
<div class="routes" id="routes"></div>
</main>
<footer id="footer"></footer>
<script id="dashboard-data" type="application/json">__DASHBOARD_JSON__</script>
<script>
"use strict";
const LABEL={verified:"Verified",outdated_client:"Outdated client",unknown_origin:"Unknown origin",invalid:"Invalid",reused:"Reused"};
const VCLASS={"ready to enforce":"v-ready","wait":"v-wait","investigate":"v-investigate","not enough traffic":"v-nodata"};
const VORDER={"investigate":0,"wait":1,"ready to enforce":2,"not enough traffic":3};
let data=JSON.parse(document.getElementById("dashboard-data").textContent);
let win=["hour","day","week"].includes(location.hash.slice(1))?location.hash.slice(1):"day";
let lastOk=Date.now();
function el(tag,attrs,...kids){const e=document.createElement(tag);for(const k in attrs||{}){if(k==="class")e.className=attrs[k];else e.setAttribute(k,attrs[k]);}
for(const c of kids){if(c!==null&&c!==undefined)e.append(c.nodeType?c:String(c));}return e;}
function svg(tag,attrs){const e=document.createElementNS("http://www.w3.org/2000/svg",tag);for(const k in attrs)e.setAttribute(k,attrs[k]);return e;}
const fmt=n=>n.toLocaleString("en-US");
/* "1 request", "2 requests": a count with its noun in the right number. */
const count=(n,one,many)=>fmt(n)+" "+(n===1?one:many);
/* Results of the issuer that are not refusals (docs/issuer.md); every other result is a refusal, shown in red. */
const ISSUER_OK=["minted","challenge","jwks"];
/* The y axis of a chart whose tallest bar is max: a step of 1, 2 or 5 × 10^k giving at most 4 steps, the top
   rounded up to a whole step, and one tick per step — distinct whole numbers, placed at their true height. */
function yTicks(max){let step=1;while(Math.ceil(max/step)>4){const lead=String(step)[0];step=lead==="2"?step*5/2:step*2;}
const top=Math.max(1,Math.ceil(max/step))*step;const ticks=[];for(let v=0;v<=top;v+=step)ticks.push(v);return {top,ticks};}
const pct=x=>(x*100).toFixed(x>0&&x<0.001?3:2)+"%";
function ago(s){if(s===null||s===undefined)return "—";if(s<120)return s+" s";if(s<7200)return Math.round(s/60)+" min";if(s<172800)return (s/3600).toFixed(1)+" h";return (s/86400).toFixed(1)+" d";}
function time(t,withDate){const d=new Date(t*1000);const hm=d.toLocaleTimeString([], {hour:"2-digit",minute:"2-digit"});
return withDate?d.toLocaleDateString([], {month:"short",day:"numeric"})+" "+hm:hm;}
/* A verdict with its alert (docs/dashboard.md): reused tokens above 1% colour a wait as red as investigate. */
function pill(v){const a=v.alert&&v.verdict!=="investigate";return el("span",{class:"pill "+(a?"v-investigate alert":VCLASS[v.verdict]||"v-nodata"),
 title:a?"reused "+pct(v.reused_share)+" of requests: replays, or clients resending limited-use tokens":""},v.verdict);}
function status(){const box=document.getElementById("status");box.replaceChildren();
const k=data.key_set,r=data.replay_store,i=data.issuer,h=data.history;
/* Firebase's key set: ok green, not used (app_check.jwks.url: none, a choice) neutral, anything else red; then the
   gateway's own issuer's keys, which need no fetch. */
const kid=String(k.own_issuer?.signs_with??"");
const own=k.own_issuer?el("span",{class:"own-issuer"}," · own issuer: "+count(k.own_issuer.keys,"key","keys")+" (local), signs with ",
 el("span",{class:"kid",title:kid},kid.length>12?kid.slice(0,10)+"…":kid)):null;
if(k.status==="not used")box.append(el("div",{id:"key-set"},el("b",null,"Key set"),el("span",{class:"not-used"},"Firebase's: not used"),
 el("span",{class:"muted"}," (jwks url: none)"),own));
else{const ks=k.status==="ok"?el("span",{class:"ok"},"ok"):el("span",{class:"bad"},k.status);
box.append(el("div",{id:"key-set"},el("b",null,"Key set"),ks," · ",(k.keys??0)+((k.keys===1)?" key":" keys")+" · age "+ago(k.age_seconds)+" · last fetch: ",
 el("span",{class:(k.last_fetch||"").startsWith("error")?"bad":""},k.last_fetch??"—"),own));}
const rs=r.status==="ok"?el("span",{class:"ok"},"ok"):r.status==="not configured"?el("span",null,"not configured"):el("span",{class:"bad"},r.status);
box.append(el("div",{id:"replay-store"},el("b",null,"Replay store"+(r.store?" ("+r.store+")":"")),rs,
 r.store?" · consumed "+fmt(r.consumed)+" · reused "+fmt(r.reused)+" · errors ":"",r.store?el("span",{class:r.errors>0?"bad":""},fmt(r.errors)):null));
/* The issuer's exchanges in the window by result (each named once), most first; a refusal names its methods. */
const byResult={};for(const e of (i.exchanges||[])){const n=e[win]||0;if(!n)continue;const r=byResult[e.result]??={result:e.result,n:0,methods:{}};
r.n+=n;r.methods[e.method]=(r.methods[e.method]||0)+n;}
const results=Object.values(byResult).sort((a,b)=>b.n-a.n||(a.result<b.result?-1:1));const exTotal=results.reduce((n,r)=>n+r.n,0);
const methods=r=>Object.entries(r.methods).sort((a,b)=>b[1]-a[1]||(a[0]<b[0]?-1:1));
/* Of the tokens minted in the window, those bound to a DPoP key (cnf.jkt). */
const ib=i.bound?.[win];const bound=ib&&ib.minted?el("span",{class:"issuer-bound"}," · bound "+fmt(ib.bound)+" of "+fmt(ib.minted)+" minted"+(ib.bound?" ("+pct(ib.bound_share)+")":"")):null;
box.append(el("div",{id:"issuer"},el("b",null,"Issuer"),i.configured?count(exTotal,"exchange","exchanges")+" in the last "+win:"not configured",
 ...results.map(r=>{const ok=ISSUER_OK.includes(r.result);const m=methods(r);
 return el("span",{class:ok?"exchange":"exchange bad","data-result":r.result,title:m.map(([k,v])=>k+": "+fmt(v)).join("\n")},
 " · "+r.result+" "+fmt(r.n)+(ok?"":" ("+m.slice(0,2).map(([k,v])=>k+(m.length>1?" "+fmt(v):"")).join(", ")+(m.length>2?", …":"")+")"));}),bound));
/* App Attest fraud risk: per app, the keys seen in the window by the bucket of their latest metric, and refusals for risk. */
const rk=i.risk;if(rk&&rk.apps.length)box.append(el("div",{id:"issuer-risk"},el("b",null,"Fraud risk"),...rk.apps.map(a=>{const ks=a.keys[win];
const seen=rk.buckets.reduce((n,b)=>n+ks[b],0);const refused=Object.values(a.refusals).reduce((n,r)=>n+r[win],0);
return el("span",{class:"risk-app","data-app":a.app_id},el("span",{class:"app-id"},a.app_id),": "+count(seen,"key","keys")+" seen",
 ...rk.buckets.map((b,j)=>el("span",{class:"risk-bucket","data-bucket":b,title:b==="unknown"?"no refreshed receipt yet":b==="+Inf"?"metric above "+rk.buckets[j-1]:"metric ≤ "+b},
 " · "+(b==="unknown"?"unknown":b==="+Inf"?">"+rk.buckets[j-1]:"≤"+b)+" "+fmt(ks[b]))),
 el("span",{class:refused?"risk-refused bad":"risk-refused"}," · refused for risk "+fmt(refused)));})));
box.append(el("div",{id:"history"},el("b",null,"History"),(h.bytes/1048576).toFixed(1)+" MiB of max "+(h.bound_bytes/1048576).toFixed(1)+" MiB",
 h.file?" · saved "+(h.last_write?time(Date.parse(h.last_write)/1000):"not yet"):" · memory only",h.last_write_error?el("span",{class:"bad"}," · "+h.last_write_error):null));}
/* Attention first: investigate, wait, ready, not enough traffic; off routes last; then config order. */
const rank=v=>v.alert?0:VORDER[v.verdict];
function ordered(){return [...data.routes].sort((a,b)=>(a.mode==="off")-(b.mode==="off")||(rank(a.windows[win].verdict)-rank(b.windows[win].verdict)));}
function table(){const body=document.querySelector("#routes-table tbody");body.replaceChildren();
for(const r of ordered()){const w=r.windows[win];const tr=el("tr",{"data-route":r.name});
tr.append(el("td",{class:"verdict"},pill(w.verdict)));
tr.append(el("td",null,el("a",{href:"#"+win,"data-goto":r.name},r.name),r.in_config?null:el("span",{class:"share"},"not in the current config")));
tr.append(el("td",null,el("span",{class:"mode mode-"+r.mode},r.mode)));
tr.append(el("td",{class:"total"},fmt(w.total)));
for(const c of data.categories){tr.append(el("td",{"data-category":c},fmt(w.counts[c]),w.counts[c]?el("span",{class:"share"},pct(w.shares[c])):null));}
tr.append(el("td",{class:"bound"},fmt(w.dpop.bound),w.dpop.bound?el("span",{class:"share"},pct(w.dpop.bound_share)+" of verified"):null));
tr.append(el("td",{class:"why"},r.mode==="off"?"App Check is off on this route (requests are not checked)":w.verdict.because+(r.mode==="enforce"&&w.verdict.verdict==="ready to enforce"?" · already enforced":"")));
body.append(tr);}
body.querySelectorAll("a[data-goto]").forEach(a=>a.addEventListener("click",ev=>{ev.preventDefault();
const t=document.getElementById("route-"+a.dataset.goto);if(t)t.scrollIntoView({behavior:"smooth"});}));}
function chart(w,windowInfo){const W=600,H=150,L=44,B=18,T=6;const pts=w.series.points;const n=pts.length||1;
const totals=pts.map(p=>p.reduce((a,b)=>a+b,0));const axis=yTicks(Math.max(1,...totals));const max=axis.top;
const s=svg("svg",{viewBox:`0 0 ${W} ${H}`,role:"img","aria-label":"requests per category over the "+win});
const bw=(W-L)/n;
for(const v of axis.ticks){const y=T+(H-T-B)*(1-v/max);s.append(svg("line",{x1:L,x2:W,y1:y,y2:y,stroke:"currentColor","stroke-opacity":v?0.15:0.4}));
const t=svg("text",{class:"y-tick",x:L-4,y:y+4,"text-anchor":"end","font-size":11,fill:"currentColor","fill-opacity":0.7});t.textContent=fmt(v);s.append(t);}
pts.forEach((p,i)=>{let y=H-B;const x=L+i*bw;const g=svg("g",{});const tip=svg("title",{});
tip.textContent=time(w.series.start+i*w.series.step_seconds,win!=="hour")+"\n"+data.categories.map((c,j)=>LABEL[c]+": "+fmt(p[j])).join("\n");g.append(tip);
data.categories.forEach((c,j)=>{if(!p[j])return;const h=(H-T-B)*p[j]/max;y-=h;
g.append(svg("rect",{x:x+0.5,y:y,width:Math.max(bw-1,0.8),height:Math.max(h,0.6),fill:`var(--${c})`}));});s.append(g);});
/* The last bar is the bucket still filling: the axis ends now, not at that bucket's end. */
const end=Math.min(w.series.start+n*w.series.step_seconds,data.now);
for(const [x,t,a] of [[L,w.series.start,"start"],[W,end,"end"]]){const e=svg("text",{class:"x-"+a,x:x,y:H-4,"text-anchor":a,"font-size":11,fill:"currentColor","fill-opacity":0.7});
e.textContent=time(t,win!=="hour");s.append(e);}
return s;}
function cards(){const box=document.getElementById("routes");box.replaceChildren();
for(const r of ordered()){const w=r.windows[win];const card=el("section",{class:"route",id:"route-"+r.name,"data-route":r.name});
card.append(el("header",null,el("h2",{style:"margin:0"},r.name),el("span",{class:"mode mode-"+r.mode},r.mode),pill(w.verdict),
 el("span",{class:"share requests"},count(w.total,"request","requests")+" in the last "+win)));
card.append(chart(w));
card.append(el("div",{class:"legend"},...data.categories.map(c=>el("span",null,el("i",{style:`background:var(--${c})`}),LABEL[c]+" "+fmt(w.counts[c])))));
/* The DPoP bound share (docs/dpop.md, rollout): of the verified requests, those with a key-bound token and its proof. */
const d=w.dpop;card.append(el("p",{class:"dpop"},el("b",null,"Bound tokens (DPoP)"),": ",d.verified?fmt(d.bound)+" of "+count(d.verified,"verified request","verified requests")
 +(d.bound?" ("+pct(d.bound_share)+")":""):"no verified requests",r.dpop?el("span",{class:"muted"}," · dpop: "+r.dpop):null));
const reasons=el("ol",{class:"reasons"});for(const x of w.reasons)reasons.append(el("li",null,el("span",null,x.reason),el("span",null,fmt(x.count))));
if(w.more_reasons)reasons.append(el("li",null,el("span",null,"more"),el("span",null,fmt(w.more_reasons))));
const apps=el("ul",{class:"apps"});for(const a of w.app_ids){const bad=a.total-a.counts.verified;
apps.append(el("li",null,el("span",null,a.app_id),el("span",null,fmt(a.total)+(bad?" ("+fmt(bad)+" refused)":""))));}
card.append(el("div",{class:"cols"},el("div",null,el("h3",null,"Top rejection reasons"),w.reasons.length?reasons:el("p",{class:"empty"},"none")),
 el("div",null,el("h3",null,"Top App IDs"),w.app_ids.length?apps:el("p",{class:"empty"},"none (App IDs come from tokens with a valid signature)"))));
box.append(card);}}
function render(){document.querySelectorAll(".tabs button").forEach(b=>b.setAttribute("aria-pressed",String(b.dataset.window===win)));
status();table();cards();
const s=data.settings;document.getElementById("footer").textContent=`Verdict per route over the selected window: not enough traffic below ${count(s.min_requests,"request","requests")}; then investigate when invalid + unknown origin > ${pct(s.invalid_unknown_limit)}; wait when outdated clients > ${pct(s.outdated_limit)}; wait, shown as loudly as investigate, when reused > ${pct(s.reused_limit)}; ready to enforce at verified ≥ ${pct(s.ready_share)}; otherwise wait. Data: /dashboard.json · generated ${data.generated_at}.`;
stamp();}
function stamp(){const u=document.getElementById("updated");const age=Math.round((Date.now()-lastOk)/1000);
if(age>90){u.className="stale";u.textContent="not updated for "+ago(age)+" — is the gateway running?";}
else{u.className="";u.textContent="updated "+new Date(lastOk).toLocaleTimeString()+" · refreshes every 30 s";}}
async function refresh(){try{const r=await fetch("dashboard.json",{cache:"no-store"});if(!r.ok)throw new Error(r.status);
data=await r.json();lastOk=Date.now();render();}catch(e){stamp();}}
document.querySelectorAll(".tabs button").forEach(b=>b.addEventListener("click",()=>{win=b.dataset.window;history.replaceState(null,"","#"+win);render();}));
render();setInterval(refresh,30000);setInterval(stamp,10000);
</script>
</body>
</html>
"""#
}
