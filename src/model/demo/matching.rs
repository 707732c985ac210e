//! Text matching for the demo model: folding (lowercase, accents removed, whole words) and the
//! phrase lists each intent is recognised by.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

// ---------------------------------------------------------------------------------------------
// Text matching

/// Lowercase, accents removed, every run of non-alphanumeric characters turned into one space,
/// padded with a space on each side so `has` matches whole words and phrases.
pub(super) fn fold(text: &str) -> String {
    let mut out = String::from(" ");
    for c in text
        .nfd()
        .filter(|c| !is_combining_mark(*c))
        .flat_map(char::to_lowercase)
    {
        if c.is_alphanumeric() {
            out.push(c);
        } else if !out.ends_with(' ') {
            out.push(' ');
        }
    }
    if !out.ends_with(' ') {
        out.push(' ');
    }
    out
}

pub(super) fn has(folded: &str, phrases: &[&str]) -> bool {
    phrases
        .iter()
        .any(|p| !p.is_empty() && folded.contains(&format!(" {p} ")))
}

pub(super) fn words(folded: &str) -> Vec<String> {
    folded.split_whitespace().map(str::to_owned).collect()
}

pub(super) fn content_words(folded: &str) -> Vec<String> {
    folded
        .split_whitespace()
        .filter(|w| w.chars().count() >= 4 && !STOP_WORDS.contains(w))
        .map(|w| {
            // A crude singular, so "materials" meets "material".
            if w.chars().count() > 4 {
                w.strip_suffix('s').unwrap_or(w).to_owned()
            } else {
                w.to_owned()
            }
        })
        .collect()
}

pub(super) fn is_lone_url(text: &str) -> bool {
    (text.starts_with("http://") || text.starts_with("https://"))
        && !text.contains(char::is_whitespace)
}

pub(super) fn looks_non_english(raw: &str, folded: &str) -> bool {
    raw.chars()
        .any(|c| (c.is_alphabetic() && !c.is_ascii()) || c == '¿' || c == '¡')
        || has(folded, NON_ENGLISH)
}

/// A price the contact proposes: a number next to an offer phrase, or a percentage.
pub(super) fn is_counter_offer(raw: &str, folded: &str) -> bool {
    raw.chars().any(|c| c.is_ascii_digit()) && (raw.contains('%') || has(folded, COUNTER_OFFER))
}

// The phrase lists below are matched against `fold`ed text: lowercase, accents removed,
// punctuation turned into spaces ("I've paid" is "i ve paid", "pagué" is "pague"), whole words
// only. They mix English with a few Spanish and Portuguese phrases for the escalation intents.

#[rustfmt::skip]
pub(super) const INJECTION: &[&str] = &[
    "ignore previous", "ignore all", "ignore the above", "ignore your", "ignore any", "disregard",
    "system prompt", "your prompt", "your instructions", "hidden rules",
    "you are now", "reveal", "jailbreak", "developer mode", "repeat everything",
    "everything above", "text above", "word for word", "verbatim", "print your", "pretend you",
    "act as", "ignora", "ignore las", "instrucciones", "instrucoes", "muestrame tu",
    "prompt del sistema", "prompt do sistema",
];

#[rustfmt::skip]
pub(super) const BOT_QUESTION: &[&str] = &[
    "are you a bot", "are you a robot", "are you human", "are you a human", "are you real",
    "are you an ai", "are you a real person", "is this a bot", "is this a robot",
    "am i talking to a bot", "am i talking to a robot", "am i talking to a machine",
    "am i talking to a person", "am i talking to a human", "eres un bot", "eres un robot",
    "eres humano", "eres una persona", "voce e um robo", "voce e um bot", "voce e humano",
    "e um robo",
];

#[rustfmt::skip]
pub(super) const PERSON_REQUEST: &[&str] = &[
    "human", "real person", "a person", "talk to someone", "speak to someone",
    "speak with someone", "talk to somebody", "someone real", "manager", "operator",
    "representative", "staff member", "live agent", "real agent", "una persona", "con alguien",
    "hablar con", "asesor", "asesora", "uma pessoa", "com alguem", "falar com", "atendente",
    "humano",
];

#[rustfmt::skip]
pub(super) const COMPLAINT: &[&str] = &[
    "disappointed", "disappointing", "terrible", "awful", "horrible", "unhappy", "not happy",
    "worst", "complain", "complaining", "complaint", "refund", "money back", "angry", "furious",
    "rude", "unacceptable", "scam", "rip off", "ripoff", "waste of time", "waste of money",
    "dissatisfied", "bad service", "poor service", "queja", "reclamo", "reclamacion",
    "decepcionado", "decepcionada", "insatisfecho", "insatisfecha", "reembolso", "devolucion",
    "estafa", "pesimo", "pesima", "reclamacao", "insatisfeito", "insatisfeita",
    "dinheiro de volta", "perda de tempo", "pessimo", "pessima",
];

#[rustfmt::skip]
pub(super) const PAYMENT_REPORTED: &[&str] = &[
    "i paid", "i ve paid", "i have paid", "already paid", "just paid", "paid already",
    "made the payment", "made a payment", "payment done", "payment is done", "payment sent",
    "sent the payment", "sent the money", "sent you the money", "transferred", "did the transfer",
    "transfer is done", "receipt", "proof of payment", "ya pague", "pague", "hice el pago",
    "hice la transferencia", "transferi", "comprobante", "paguei", "fiz o pagamento",
    "fiz a transferencia", "comprovante",
];

#[rustfmt::skip]
pub(super) const HAGGLE: &[&str] = &[
    "negotiate", "negotiation", "haggle", "best price", "better price", "lower the price",
    "lower price", "price match", "match the price", "match their price", "last price",
    "final price", "special price", "negociar", "regatear",
];

#[rustfmt::skip]
pub(super) const COUNTER_OFFER: &[&str] = &[
    "would you take", "will you take", "would you accept", "will you accept", "i ll pay",
    "i will pay", "i can pay", "i can only pay", "i could pay", "how about", "do it for",
    "for only", "off", "percent", "te doy", "te pago", "eu pago",
];

#[rustfmt::skip]
pub(super) const DISCOUNT: &[&str] = &[
    "discount", "discounts", "cheaper", "deal", "deals", "promo", "promotion", "promotions",
    "coupon", "voucher", "expensive", "afford", "sale", "special offer", "any offers", "reduced",
    "descuento", "descuentos", "promocion", "mas barato", "desconto", "descontos", "promocao",
    "mais barato",
];

#[rustfmt::skip]
pub(super) const PRICE: &[&str] = &[
    "price", "prices", "pricing", "cost", "costs", "how much", "fee", "fees", "tuition", "rate",
    "rates", "cuanto", "cuesta", "cuestan", "precio", "precios", "quanto", "custa", "preco", "precos",
    "valor",
];

#[rustfmt::skip]
pub(super) const SCHEDULE: &[&str] = &[
    "when", "schedule", "schedules", "timetable", "what time", "which days", "what days", "dates",
    "date", "start", "starts", "how long", "duration", "hours", "cuando", "horario", "horarios",
    "que dias", "que hora", "cuanto dura", "duracion", "quando", "que horas", "quanto tempo",
    "duracao", "dias",
];

#[rustfmt::skip]
pub(super) const PAYMENT_QUESTION: &[&str] = &[
    "payment options", "payment option", "payment plan", "payment plans", "payment methods",
    "instalment", "instalments", "installment", "installments", "pay in", "ways to pay",
    "how can i pay", "how do i pay", "pay monthly", "monthly payments", "deposit", "financing",
    "formas de pago", "forma de pago", "cuotas", "formas de pagamento", "forma de pagamento",
    "parcelas", "parcelar",
];

#[rustfmt::skip]
pub(super) const LINK_REQUEST: &[&str] = &[
    "link", "book", "booking", "enrol", "enroll", "enrolment", "enrollment", "sign up",
    "sign me up", "register", "registration", "book a spot", "book a place", "reserve", "checkout",
    "enlace", "inscribirme", "inscripcion", "reservar", "apuntarme", "agendar", "inscrever",
    "inscricao", "matricula",
];

/// 028: the contact wants another offering than the one under way.
#[rustfmt::skip]
pub(super) const SWITCH: &[&str] = &["switch", "instead", "change to", "swap", "rather do", "prefer"];

/// 034: the contact says they are not here to buy (a customer already, a supplier, a job
/// seeker, a wrong number).
#[rustfmt::skip]
pub(super) const NOT_A_PROSPECT: &[&str] = &[
    "already a student", "already enrolled", "already a customer", "i m a customer",
    "i am a customer", "former student", "i am a supplier", "i m a supplier", "we supply",
    "we sell", "looking for work", "looking for a job", "job opening", "vacancy", "wrong number",
];

#[rustfmt::skip]
pub(super) const MATERIAL_REQUEST: &[&str] = &[
    "brochure", "syllabus", "details", "more info", "more information", "send me",
    "something to read", "pdf", "curriculum", "programme", "info pack", "folleto", "detalles",
    "mas informacion", "detalhes", "mais informacoes",
];

#[rustfmt::skip]
pub(super) const FLOW_LINK_WORDS: &[&str] = &[
    "link", "booking", "payment", "enrol", "enroll", "enrolment", "checkout", "sign",
];

#[rustfmt::skip]
pub(super) const FLOW_MATERIAL_WORDS: &[&str] = &[
    "brochure", "syllabus", "details", "pdf", "read", "program", "programme", "information",
    "info", "curriculum",
];

#[rustfmt::skip]
pub(super) const OVERVIEW: &[&str] = &[
    "what courses", "which courses", "what classes", "which classes", "what do you offer",
    "what do you have", "what can i take", "your courses", "your classes", "options",
    "que ofrecen", "que servicios", "que tienen", "que oferecem", "quais servicos",
    "o que voces",
];

#[rustfmt::skip]
pub(super) const GREETING: &[&str] = &[
    "hi", "hello", "hey", "hiya", "howdy", "greetings", "good morning", "good afternoon",
    "good evening", "hola", "buenas", "buenos dias", "buenas tardes", "oi", "ola", "bom dia",
    "boa tarde", "boa noite",
];

#[rustfmt::skip]
pub(super) const NON_ENGLISH: &[&str] = &[
    "hola", "quiero", "cuanto", "cuesta", "precio", "gracias", "por favor", "necesito", "puedo",
    "tengo", "usted", "curso", "cursos", "clases", "ola", "oi", "obrigado", "obrigada", "quanto",
    "custa", "preco", "voce", "quero", "estou", "posso", "bonjour", "combien", "merci", "pour",
    "vous", "con", "para", "muy", "muito", "que", "una", "uma",
];

/// Name words too common to single out one offering.
#[rustfmt::skip]
pub(super) const GENERIC_NAME_WORDS: &[&str] = &[
    "course", "courses", "class", "classes", "workshop", "program", "programme", "session",
    "lesson", "lessons", "with", "from", "level", "pack", "plan",
];

#[rustfmt::skip]
pub(super) const STOP_WORDS: &[&str] = &[
    "what", "when", "where", "which", "with", "that", "this", "your", "have", "does", "there",
    "they", "from", "about", "would", "could", "should", "will", "into", "them", "then", "than",
    "much", "many", "some", "also", "just", "like", "want", "need", "please", "here", "hello",
    "thanks", "thank", "know", "tell", "give", "make", "more", "very", "really", "help", "course",
    "courses", "class", "classes", "been", "were", "being", "their", "these", "those", "other",
    "good", "great",
];
