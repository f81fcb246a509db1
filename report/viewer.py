"""The per-sample viewer: a section of index.html that lists every scored sample of a model and opens
one with every pass's prompt (the first pass's, then each follow-up's: critique, judge), responses,
extracts, gold, score, cost, latency, calls (and the retries they needed) and error.

The page embeds only a small index (views, models, counts); each model's rows and each view's prompts
are JS files beside the page (report/samples.py) loaded on demand by a `<script>` tag, which works
from file:// and from `evalsweep view`. Every value is put into the page with textContent, never as
HTML, so a response can not inject markup.
"""

from __future__ import annotations

import html

import orjson

from report.samples import STATUSES, ViewData

CSS = """
#viewer .bar{display:flex;flex-wrap:wrap;gap:.5em 1em;align-items:center;margin:.5em 0}
#viewer label{font-size:13px;color:#444}#viewer select,#viewer input{font:inherit;max-width:16em}
#v-rows tbody tr{cursor:pointer}#v-rows tbody tr:hover{background:#f3f6ff}
#v-rows tr.sel{background:#e3ebff}#v-rows td{max-width:14em;overflow:hidden;text-overflow:ellipsis}
.st-correct{color:#1b7c3c}.st-wrong{color:#b3261e}.st-partial{color:#a66300}.st-error{color:#7b1fa2}
.st-unextractable{color:#555;font-style:italic}.st-reasoning_exhausted{color:#a60}.st-unscored{color:#999}
#v-detail{border:1px solid #ccd;border-radius:6px;padding:.6em 1em;margin:1em 0;background:#fcfcff}
#v-detail pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;padding:.5em;margin:.3em 0;
max-height:28em;overflow:auto;font-size:12.5px}
#v-detail img{max-width:min(100%,640px);display:block}.v-call{border-top:1px dashed #ccc;margin-top:.6em}
.v-kv{display:flex;flex-wrap:wrap;gap:.2em 1.2em;font-size:13px}.v-kv b{color:#444;font-weight:600}
"""

JS = r"""
var EVS={cache:{},waiting:{},put:function(k,d){EVS.cache[k]=d;var w=EVS.waiting[k]||[];
delete EVS.waiting[k];w.forEach(function(f){f[0](d)})},
load:function(k){if(k in EVS.cache)return Promise.resolve(EVS.cache[k]);
return new Promise(function(res,rej){if(EVS.waiting[k]){EVS.waiting[k].push([res,rej]);return}
EVS.waiting[k]=[[res,rej]];var s=document.createElement('script');s.src=k;
s.onerror=function(){var w=EVS.waiting[k]||[];delete EVS.waiting[k];
w.forEach(function(f){f[1](new Error('cannot load '+k))})};document.head.appendChild(s)})}};
(function(){
var IX=JSON.parse(document.getElementById('evs-index').textContent);
if(!IX.length)return;
var $=function(id){return document.getElementById(id)};
var PAGE=200,shown=PAGE,rows=[],token=0;
function el(tag,text,cls){var e=document.createElement(tag);if(text!==undefined&&text!==null)e.textContent=text;
if(cls)e.className=cls;return e}
function opt(sel,value,text){var o=el('option',text);o.value=value;sel.appendChild(o)}
function fmt(v,kind){if(v===null||v===undefined||v==='')return '';
if(kind==='usd')return '$'+(v>=1?v.toFixed(2):v.toPrecision(2));
if(kind==='s')return v.toFixed(2)+' s';if(typeof v==='number')return String(Math.round(v*1000)/1000);
return String(v)}
function view(){return IX[Number($('v-suite').value)]}
function fillSuite(){var v=view(),m=$('v-model'),s=$('v-stage');m.innerHTML='';s.innerHTML='';
v.models.forEach(function(md,i){opt(m,String(i),md.display+' ('+md.n+')')});
if(v.models.length>1)opt(m,'all','all models');
opt(s,'','any stage');var st={};v.models.forEach(function(md){md.stages.forEach(function(x){st[x]=1})});
Object.keys(st).sort().forEach(function(x){opt(s,x,x)});
$('v-notes').textContent=v.notes.join(' ')}
function models(){var v=view(),m=$('v-model').value;
return m==='all'?v.models:[v.models[Number(m)]]}
function refresh(){var my=++token,ms=models();$('v-count').textContent='loading…';
Promise.all(ms.map(function(md){return EVS.load(md.file)})).then(function(datas){
if(my!==token)return;rows=[];datas.forEach(function(d,j){d.forEach(function(r){rows.push([ms[j],r])})});
shown=PAGE;render()}).catch(function(e){$('v-count').textContent=String(e.message)})}
function keep(r){var q=$('v-item').value.trim().toLowerCase(),st=$('v-status').value,sg=$('v-stage').value;
if(q&&r.i.toLowerCase().indexOf(q)<0)return false;if(st&&r.st!==st)return false;
if(sg&&r.sg!==sg&&!r.k.some(function(c){return c.sg===sg}))return false;return true}
function render(){var b=$('v-rows').tBodies[0],hit=rows.filter(function(p){return keep(p[1])});
b.innerHTML='';hit.slice(0,shown).forEach(function(p){var md=p[0],r=p[1],tr=el('tr');
[md.display,r.i+(r.n!==undefined?' #'+r.n:''),r.st,r.x,r.g,fmt(r.s),r.sg,fmt(r.c,'usd'),fmt(r.l,'s'),
r.a+(r.rt?' (+'+r.rt+' retr'+(r.rt===1?'y':'ies')+')':''),r.e].forEach(function(v,i){var td=el('td',v===undefined?'':v,i===2?'st-'+r.st:'');
td.title=td.textContent;tr.appendChild(td)});
tr.addEventListener('click',function(){Array.prototype.forEach.call(b.rows,function(x){x.className=''});
tr.className='sel';open(md,r)});b.appendChild(tr)});
$('v-count').textContent='showing '+Math.min(shown,hit.length)+' of '+hit.length+' matching ('+rows.length+' loaded)';
$('v-more').style.display=hit.length>shown?'':'none'}
function kv(box,pairs){var d=el('div',null,'v-kv');pairs.forEach(function(p){
if(p[1]===null||p[1]===undefined||p[1]==='')return;var s=el('span');s.appendChild(el('b',p[0]+': '));
s.appendChild(document.createTextNode(String(p[1])));d.appendChild(s)});box.appendChild(d)}
function msgsInto(box,msgs){msgs.forEach(function(m){box.appendChild(el('div',m.r,'note'));
m.p.forEach(function(part){if(part[0]==='i'){var im=el('img');im.src=part[1];im.alt='prompt image';
box.appendChild(im)}else box.appendChild(el('pre',part[1]))})})}
function open(md,r){var box=$('v-detail');box.innerHTML='';box.style.display='';
box.appendChild(el('h4',md.display+' · '+r.i+(r.n!==undefined?' · sample '+r.n:'')));
kv(box,[['status',r.st],['extracted',r.x===null?'(none)':r.x],['gold',r.g],['score',fmt(r.s)],
['stage',r.sg],['cost',fmt(r.c,'usd')],['latency',fmt(r.l,'s')],['calls',r.a],['retries',r.rt],
['error',r.e]]);
var pb=el('div');box.appendChild(el('h5','Prompt (first pass)'));box.appendChild(pb);var v=view();
if(!v.prompts){pb.appendChild(el('p','prompt not available (see the note above)','note'))}
else{pb.appendChild(el('p','loading…','note'));EVS.load(v.prompts).then(function(P){pb.innerHTML='';
var msgs=P[r.i];if(!msgs){pb.appendChild(el('p','no prompt for this item','note'));return}
msgsInto(pb,msgs)}).catch(function(e){pb.textContent=e.message})}
box.appendChild(el('h5','Responses ('+r.k.length+' call'+(r.k.length===1?'':'s')+')'));
r.k.forEach(function(c){var d=el('div',null,'v-call');
kv(d,[['sample',c.n],['pass',c.p],['via',c.v],['extracted',c.x],['stage',c.sg],['cost',fmt(c.c,'usd')],
['latency',fmt(c.l,'s')],['attempts',c.a],['retries',c.a>1?c.a-1:''],['cached',c.ch?'yes':''],
['finish',c.f],['error',c.e?(c.ek?c.ek+': ':'')+c.e:'']]);
if(c.pm){var pd=el('details',null,'v-pm');pd.appendChild(el('summary','prompt of the '+c.p+' pass'));
msgsInto(pd,c.pm);d.appendChild(pd)}
d.appendChild(el('pre',c.t===null?'(no text)':c.t));box.appendChild(d)});
box.scrollIntoView({block:'nearest'})}
IX.forEach(function(v,i){opt($('v-suite'),String(i),v.label)});
opt($('v-status'),'','any outcome');STATUSES.forEach(function(s){opt($('v-status'),s,s)});
$('v-suite').addEventListener('change',function(){fillSuite();refresh()});
$('v-model').addEventListener('change',refresh);
['v-status','v-stage'].forEach(function(id){$(id).addEventListener('change',function(){shown=PAGE;render()})});
$('v-item').addEventListener('input',function(){shown=PAGE;render()});
$('v-more').addEventListener('click',function(){shown+=PAGE;render()});
fillSuite();refresh()})();
"""

HEAD = ["model", "item", "outcome", "extracted", "gold", "score", "stage", "cost", "latency", "calls", "error"]


def section(views: list[ViewData]) -> str:
    """The viewer's HTML (controls, table, detail box) and its embedded index."""
    if not any(v.models for v in views):
        return ""
    index = [
        {"label": v.label, "slug": v.slug, "models": v.models, "prompts": v.prompts, "notes": v.notes}
        for v in views
        if v.models
    ]
    data = orjson.dumps(index).decode().replace("</", "<\\/")
    head = "".join(f"<th class='t'>{html.escape(h)}</th>" for h in HEAD)
    js = JS.replace("STATUSES.forEach", orjson.dumps(list(STATUSES)).decode() + ".forEach")
    return f"""<h2 id="samples">Samples</h2>
<section id="viewer"><p class="note">Every scored sample: pick a suite and a model (each model's samples
load only when chosen), filter, and click a row to open its prompt and responses.</p>
<div class="bar"><label>suite <select id="v-suite"></select></label>
<label>model <select id="v-model"></select></label>
<label>item <input id="v-item" type="search" placeholder="item id contains…"></label>
<label>outcome <select id="v-status"></select></label>
<label>extraction stage <select id="v-stage"></select></label>
<span id="v-count" class="note"></span></div><p id="v-notes" class="note"></p>
<div class="scroll"><table id="v-rows"><thead><tr>{head}</tr></thead><tbody></tbody></table></div>
<button id="v-more" type="button" style="display:none">show more</button>
<div id="v-detail" style="display:none"></div></section>
<script type="application/json" id="evs-index">{data}</script>
<style>{CSS}</style><script>{js}</script>"""
