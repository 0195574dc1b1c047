/* The page's fixed parts: the stylesheet, the script (tabs and table sorting, nothing
 * else: no network, no library) and the atomic write that closes the document. */
#include <stdio.h>
#include <string.h>

#include "html_internal.h"

const char lp_html__css[] =
    "body{margin:0;font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1c1c1c;"
    "background:#f6f7f9}\n"
    "main{max-width:1280px;margin:0 auto;padding:16px 24px 48px}\n"
    "h1{font-size:24px;margin:8px 0 4px}h2{font-size:19px;margin:28px 0 8px;border-bottom:1px solid #ddd;"
    "padding-bottom:4px}h3{font-size:16px;margin:18px 0 6px}h4{font-size:14px;margin:12px 0 4px}\n"
    "section{margin-bottom:12px}p{margin:6px 0}.lp-note{color:#666;font-size:12.5px}\n"
    ".lp-stats{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}\n"
    ".lp-stat{background:#fff;border:1px solid #e2e4e8;border-radius:6px;padding:8px 14px;min-width:120px}\n"
    ".lp-stat span{display:block;color:#666;font-size:12px}.lp-stat b{font-size:18px;font-weight:600}\n"
    ".lp-chart{margin:12px 0;background:#fff;border:1px solid #e2e4e8;border-radius:6px;padding:6px}\n"
    ".lp-chart svg{display:block;width:100%;height:auto}\n"
    ".lp-chart figcaption{color:#555;font-size:12px;padding:2px 6px}.lp-files{color:#999}\n"
    ".lp-table-wrap{overflow-x:auto;margin:8px 0}\n"
    "table{border-collapse:collapse;background:#fff;font-size:13px}\n"
    "th,td{border:1px solid #e2e4e8;padding:4px 8px;text-align:left;vertical-align:top}\n"
    "td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}\n"
    "th{background:#eef0f3;cursor:pointer;user-select:none;white-space:nowrap}\n"
    "th[data-sort=asc]::after{content:' \\25B2'}th[data-sort=desc]::after{content:' \\25BC'}\n"
    "tbody tr:nth-child(even){background:#fafbfc}\n"
    ".lp-tabnav{display:flex;flex-wrap:wrap;gap:4px;border-bottom:2px solid #d0d4da;margin:16px 0 8px}\n"
    ".lp-tabnav button{font:inherit;border:1px solid #d0d4da;border-bottom:none;background:#eef0f3;"
    "padding:6px 14px;border-radius:6px 6px 0 0;cursor:pointer}\n"
    ".lp-tabnav button.on{background:#fff;font-weight:600}\n"
    ".lp-js .lp-tab-title{display:none}.lp-js.lp-all .lp-tab-title{display:block}\n"
    ".lp-good{color:#1a7f37}.lp-bad{color:#b42318}code{background:#eef0f3;padding:1px 4px;border-radius:3px}\n"
    "ul{margin:6px 0;padding-left:22px}li{margin:3px 0}\n";

const char lp_html__js[] =
    "(function(){\n"
    "var all=location.hash==='#all';\n"
    "document.body.classList.add('lp-js');if(all)document.body.classList.add('lp-all');\n"
    "[].forEach.call(document.querySelectorAll('.lp-tabs'),function(t){\n"
    " var tabs=[].filter.call(t.children,function(c){return c.classList.contains('lp-tab');});\n"
    " if(!tabs.length||all)return;\n"
    " var nav=document.createElement('nav');nav.className='lp-tabnav';\n"
    " function show(i){tabs.forEach(function(p,j){p.hidden=j!==i;nav.children[j].classList.toggle('on',j===i);});}\n"
    " tabs.forEach(function(p,i){var b=document.createElement('button');b.type='button';\n"
    "  b.textContent=p.getAttribute('data-label');b.onclick=function(){show(i);};nav.appendChild(b);});\n"
    " t.insertBefore(nav,t.firstChild);\n"
    " var k=tabs.findIndex(function(p){return p.id&&'#'+p.id===location.hash;});show(k<0?0:k);\n"
    "});\n"
    "[].forEach.call(document.querySelectorAll('table.lp-sortable'),function(tb){\n"
    " var ths=tb.tHead.rows[0].cells;\n"
    " [].forEach.call(ths,function(th,c){th.onclick=function(){\n"
    "  var asc=th.getAttribute('data-sort')!=='asc';\n"
    "  [].forEach.call(ths,function(o){o.removeAttribute('data-sort');});th.setAttribute('data-sort',asc?'asc':'desc');\n"
    "  var body=tb.tBodies[0],rows=[].slice.call(body.rows);\n"
    "  rows.sort(function(a,b){var x=a.cells[c],y=b.cells[c];if(!x||!y)return 0;\n"
    "   var xv=x.getAttribute('data-v'),yv=y.getAttribute('data-v');\n"
    "   if(xv!==null&&yv!==null){if(xv===''&&yv==='')return 0;if(xv==='')return 1;if(yv==='')return -1;\n"
    "    var d=parseFloat(xv)-parseFloat(yv);return asc?d:-d;}\n"
    "   var s=x.textContent.localeCompare(y.textContent);return asc?s:-s;});\n"
    "  rows.forEach(function(r){body.appendChild(r);});};});\n"
    "});\n"
    "})();\n";

static const char tail_open[] = "</main>\n<script>\n", tail_close[] = "</script>\n</body>\n</html>\n";

lp_status lp_html_write(lp_html *h, const char *path)
{
    if (h->st != LP_OK)
        return lp_err_wrap(h->st, "%s: not written", path);
    if (h->in_table)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: not written: a table was left open", path);
    lp_atomic_file af;
    lp_status st = lp_atomic_open(&af, path);
    if (st != LP_OK)
        return st;
    fwrite(h->buf, 1, h->len, af.fp);
    fputs(tail_open, af.fp);
    fputs(lp_html__js, af.fp);
    fputs(tail_close, af.fp);
    return lp_atomic_commit(&af); // a failed write shows as the stream's error here
}
