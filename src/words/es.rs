//! Spanish (neutral, "tú" for the owner): every key of `en.rs`, translated.

use super::Key::{self, *};

pub(super) fn text(key: Key) -> &'static str {
    match key {
        TitleOf => "{}: cómo le fue al asistente de ventas",
        Title => "Cómo le fue al asistente de ventas",
        Generated => "generado {} · {} semana(s), de lunes a domingo (UTC) · manychat-agent {}",
        NoTurns => {
            "Todavía no hay conversaciones: no se registró nada en las últimas {} semana(s)."
        }
        WeekOf => "Semana del {}",
        NoTurnsThisWeek => "Ninguna conversación esta semana.",
        Week => "semana",
        None_ => "ninguno",
        AboveFlag => "más de {}: demasiado lento",
        AtAGlance => "De un vistazo: la semana del {}",
        WhatEachMeans => "Qué significa cada cifra",
        NotMeasuredYet => "Todavía sin medir",
        NotSetUp => "sin configurar",

        Contacts => "contactos nuevos",
        ContactsMeans => "Personas que te escribieron por primera vez esa semana.",
        Answers => "respondidos por el asistente",
        AnswersMeans => {
            "Mensajes que el asistente de IA respondió, o que él mismo pasó a una persona."
        }
        Late => "respondidos un momento después",
        LateMeans => {
            "De las respuestas del asistente, la parte que tardó más de lo que ManyChat espera y \
             llegó un momento después como un mensaje aparte; por encima del 20 % el asistente \
             es demasiado lento para tus contactos."
        }
        Merged => "mensajes enviados en partes",
        MergedMeans => {
            "De los mensajes que iniciaron una respuesta, la parte que reunió en esa única \
             respuesta otros mensajes enviados seguidos."
        }
        WaitTypical => "espera habitual",
        WaitTypicalMeans => {
            "Cuánto esperó como mucho la mitad de tus contactos una respuesta dada al momento."
        }
        WaitSlowest => "espera más larga habitual",
        WaitSlowestMeans => {
            "Cuánto esperaron como mucho 95 de cada 100 contactos una respuesta dada al momento."
        }
        Lookups => "consultas de datos del contacto, por respuesta",
        LookupsMeans => {
            "Cuántas veces el asistente consultó los datos de un contacto en ManyChat, por \
             respuesta."
        }
        Tokens => "lectura y escritura de la IA, por respuesta",
        TokensMeans => {
            "Cuánto texto leyó y escribió el modelo de IA por respuesta, en tokens (unas cuatro \
             letras cada uno); más texto cuesta más."
        }
        CostPerAnswer => "costo del modelo de IA por respuesta",
        CostPerAnswerMeans => {
            "Lo que cobró el modelo de IA por respuesta, en dólares estadounidenses."
        }
        Cost => "costo del modelo de IA",
        CostMeans => "Lo que cobró el modelo de IA esa semana, en dólares estadounidenses.",
        Interested => "interesados en comprar",
        InterestedMeans => "Personas que el asistente registró como interesadas en comprar.",
        InterestedShare => "parte interesada",
        InterestedShareMeans => {
            "De los contactos nuevos, la parte que estaba interesada en comprar."
        }
        Offered => "vieron una oferta",
        OfferedMeans => {
            "Personas a las que el asistente mostró una de tus ofertas, o que llegaron más lejos."
        }
        Prepared => "listos para pagar",
        PreparedMeans => {
            "Personas que ya habían elegido una oferta y estaban listas para pagar, o que \
             llegaron más lejos."
        }
        LinkSent => "recibieron el enlace de pago",
        LinkSentMeans => {
            "Personas que recibieron tu enlace de pago (los pagos se confirman en ManyChat)."
        }
        LinkRate => "recibieron el enlace, de los contactos nuevos",
        LinkRateMeans => "De los contactos nuevos, la parte que recibió el enlace de pago.",
        LinkRateInterested => "recibieron el enlace, de los interesados",
        LinkRateInterestedMeans => {
            "De las personas interesadas en comprar, la parte que recibió el enlace de pago."
        }
        LinkOnRequest => "enlaces enviados antes, a pedido",
        LinkOnRequestMeans => {
            "De los enlaces de pago enviados, la parte enviada antes de que el contacto eligiera, \
             porque lo pidió; cerca del 100 % el asistente quizá dice que lo pidieron cuando no \
             fue así."
        }
        FollowUps => "seguimientos respondidos",
        FollowUpsMeans => {
            "De los mensajes de seguimiento que envió el asistente, la parte que el contacto \
             respondió en un día."
        }
        LastWords => "últimos mensajes respondidos",
        LastWordsMeans => {
            "De los mensajes enviados cuando la ventana de 24 horas de un contacto iba a cerrarse, \
             la parte que el contacto respondió en un día."
        }
        Conversations => "conversaciones",
        ConversationsMeans => {
            "Personas que escribieron esa semana, nuevas o no: los mensajes de cada una son una \
             conversación."
        }
        Sales => "ventas (enlace de pago enviado)",
        SalesMeans => {
            "Conversaciones que llegaron a tu enlace de pago esa semana (los pagos se confirman \
             en ManyChat)."
        }
        CostPerConversation => "costo del modelo de IA por conversación",
        CostPerConversationMeans => {
            "Lo que cobró el modelo de IA por los mensajes de un contacto esa semana, en \
             promedio, en dólares estadounidenses."
        }
        CostPerSale => "costo del modelo de IA por venta",
        CostPerSaleMeans => {
            "Lo que costó en promedio una conversación que llegó a tu enlace de pago, en dólares \
             estadounidenses."
        }
        SpendPerSale => "gasto del modelo de IA por venta",
        SpendPerSaleMeans => {
            "Todo el costo del modelo de IA de la semana dividido entre las conversaciones que \
             llegaron a tu enlace de pago: lo que costó cada venta, contando las conversaciones \
             que no compraron."
        }
        CostPerHandoff => "costo del modelo de IA por derivación",
        CostPerHandoffMeans => {
            "Lo que costó en promedio una conversación pasada a tu equipo, en dólares \
             estadounidenses."
        }
        CachedShare => "texto releído",
        CachedShareMeans => {
            "Del texto que leyó el modelo de IA, la parte que ya había leído y cobró más barata."
        }
        Handoffs => "pasados a una persona",
        HandoffsMeans => {
            "Veces que el asistente pasó un contacto a tu equipo (después no interviene mientras \
             una persona lleva la conversación)."
        }
        Releases => "devueltos al asistente",
        ReleasesMeans => {
            "Veces que una conversación volvió al asistente: se acabó la espera, tu equipo quitó \
             la etiqueta de derivación o alguien liberó al contacto."
        }
        HoursWithPerson => "horas con una persona",
        HoursWithPersonMeans => {
            "Cuánto tiempo suele llevar una persona una conversación antes de que vuelva al \
             asistente (la mediana)."
        }
        Held => "mensajes dejados a tu equipo",
        HeldMeans => {
            "Mensajes que el asistente no respondió porque una persona llevaba la conversación."
        }

        SectionFunnel => "Del primer mensaje al enlace de pago",
        SectionWeeks => "Cómo respondió el asistente",
        SectionSales => "Ventas",
        SectionCost => "Lo que costó el modelo de IA (dólares estadounidenses)",
        SectionHandoffs => "Cuando una persona tomó la conversación",
        SectionPerDay => "Día a día",
        HowMessagesEnded => "cómo terminaron los mensajes",
        MessagesColumn => "mensajes",
        WhyHandedOver => "por qué se pasaron contactos a una persona",
        TimesColumn => "veces",
        WhatItDid => "qué hizo el asistente en ManyChat",
        HowItWent => "cómo salió",
        PerDayLine => "{}: {} respondidos, {}",
        Day => "día",

        PlaybookTitle => "Recibieron el enlace de pago, por versión del manual de ventas",
        PlaybookReading => {
            "Una lectura de antes y después, no un experimento controlado: cada versión atendió \
             a otros contactos en otro momento, así que una diferencia puede venir de ellos y no \
             del manual."
        }
        PlaybookCounted => {
            "Cada conversación cuenta bajo el manual (las tácticas que aprobaste) que usó el \
             asistente cuando mostró una oferta al contacto por primera vez, una vez pasadas dos \
             semanas desde el último mensaje de la conversación; hasta entonces se está \
             asentando. \"Recibieron el enlace\" significa que el asistente envió tu enlace de \
             pago: los pagos se confirman en ManyChat y no se cuentan aquí."
        }
        PlaybookVersion => "versión",
        PlaybookFirstLive => "activa desde",
        PlaybookGotLink => "recibieron el enlace",
        PlaybookShare => "proporción",
        PlaybookSettling => "aún asentándose",
        PlaybookNone => "sin manual",
        PlaybookActive => "{} (activa)",

        ChartFunnelTitle => "Del primer mensaje al enlace de pago, semana del {}",
        ChartFunnelAlt => "Gráfico de barras, semana del {}: {}.",
        ChartWeeklyTitle => "Conversaciones y ventas, semana a semana",
        ChartWeeklyAlt => "Gráfico de barras, semana a semana: {}.",
        ChartHandoffsTitle => "Por qué se pasaron contactos a una persona, todas las semanas",
        ChartHandoffsAlt => "Gráfico de barras de las derivaciones por motivo: {}.",
        ChartCostTitle => {
            "Costo del modelo de IA por conversación, semana a semana (dólares estadounidenses)"
        }
        ChartCostAlt => "Gráfico de líneas del costo del modelo de IA por conversación: {}.",
        ChartPlaybooksTitle => {
            "Recibieron el enlace de pago, por versión del manual (antes y después)"
        }
        ChartPlaybooksAlt => {
            "Gráfico de barras de la parte de conversaciones que recibió el enlace de pago, por \
             versión del manual: {}."
        }
        ChartEmpty => {
            "Todavía no hay nada que dibujar: el gráfico se llena cuando escriben los contactos."
        }
        ChartNoData => "sin datos",

        PendingSteps => "pasos del modelo de IA por respuesta",
        PendingStepsWhy => {
            "los pasos de cada respuesta se escriben en el registro del servicio, no se guardan"
        }
        PendingSales => "cifras de ventas",
        PendingSalesWhy => {
            "los archivos del negocio (CONFIG_DIR) no se cargaron, así que no se conoce su \
             configuración de ventas"
        }
        PendingIntentWhy => "tools.json no tiene un campo para el interés de compra del contacto",
        PendingFunnelWhy => "tools.json no tiene un campo para el avance de una venta",
        PendingCostPerSaleWhy => {
            "tools.json no tiene un campo para el avance de una venta, así que ninguna \
             conversación llega al enlace de pago"
        }
        PendingLinkWhy => "tools.json no tiene un flujo de enlace de pago",
        PendingPlaybooksWhy => {
            "tools.json necesita un campo para el avance de una venta y un flujo de enlace de pago"
        }

        OutcomeAnsweredInline => "respondido al momento",
        OutcomeDeferred => "respondido un momento después",
        OutcomeScripted => "respondido con tu respuesta de apertura fija",
        OutcomeEscalatedModel => "pasado a una persona por el asistente",
        OutcomeEscalatedPrecheck => {
            "pasado a una persona antes de que el asistente lo leyera (una palabra clave, un \
             límite o el presupuesto)"
        }
        OutcomeFailedValidation => {
            "pasado a una persona: la respuesta del asistente no pasó una comprobación"
        }
        OutcomeError => "pasado a una persona: el asistente no pudo responder",
        OutcomeNudge => "seguimiento enviado",
        OutcomeWindowClosing => "último mensaje antes de que se cerrara la ventana",
        OutcomeMediaFallback => "una nota de voz o un archivo que no se pudo leer",
        OutcomeHeld => "dejado a tu equipo: una persona llevaba la conversación",
        OutcomeContactBusy => {
            "registrado, sin respuesta: el contacto envió muchos mensajes a la vez"
        }

        ReasonPrice => "quería negociar el precio",
        ReasonComplaint => "presentó una queja",
        ReasonOutOfScope => "preguntó algo que tu catálogo no responde",
        ReasonExplicit => "pidió hablar con una persona",
        ReasonLowConfidence => "el asistente no estaba seguro",
        ReasonPaymentReported => "dijo que ya pagó (una persona lo confirma)",
        ReasonKeyword => "escribió una de tus palabras clave de derivación",
        ReasonTurnCap => "llegó al límite de mensajes de la conversación",
        ReasonRateLimit => "escribió demasiados mensajes en una hora",
        ReasonBudget => "se agotó el presupuesto de IA de hoy",
        ReasonBudgetContact => "se agotó el presupuesto de IA de hoy para ese contacto",
        ReasonAbort => "el modelo de IA tardó demasiado",
        ReasonCheckFailed => "la respuesta del asistente no pasó una comprobación",
        ReasonError => "el asistente no pudo responder",
        ReasonLoadShed => "demasiadas conversaciones a la vez",
        ReasonDeadLettered => "una respuesta que ManyChat nunca entregó",
        ReasonWaitExpired => "esperó demasiado detrás de sus propios mensajes anteriores",
        ReasonInterrupted => "el servicio se detuvo antes de responder",
        ReasonMedia => "envió una nota de voz o un archivo que el asistente no pudo leer",

        ToolSendFlow => "flujo enviado",
        ToolSetField => "campo del contacto guardado",
        ToolAddTag => "etiqueta añadida",
        ToolRemoveTag => "etiqueta quitada",
        ToolWriteNote => "nota para tu equipo",
        ToolScheduleNudge => "seguimiento programado",
        ToolHandoff => "pasado a una persona",
        StatusPerformed => "hecho",
        StatusFailed => "falló",
        StatusDiscarded => "no hecho: el contacto pasó a una persona",
        StatusOverCap => "no hecho: por encima del límite por respuesta",
        StatusDeadLettered => "nunca entregado",
        StatusStaged => "todavía por hacer",
        StatusRefused => "rechazado",

        ReleaseExpired => "se acabó la espera",
        ReleaseTagRemoved => "tu equipo quitó la etiqueta de derivación",
        ReleaseReleased => "alguien liberó al contacto",

        SimReadFrom => "(lo que hizo el asistente, leído de {}:)",
        SimCannotRead => {
            "(lo que hizo el asistente está en la base de datos del servicio, y este comando no \
             puede leer {}: {}. Ejecuta simulate junto al servicio, con su DATABASE_URL, para \
             verlo.)"
        }
        SimNoTurn => "todavía no hay ninguna respuesta registrada para este contacto",
        SimNoAction => "ninguna acción en ManyChat",
        SimHandedOver => "pasado a una persona, motivo guardado: {} ({})",
        SimQueued => {
            "una respuesta llegará por la cola de salida (el flujo de respuesta de ManyChat), \
             prevista para las {}"
        }
        SimFieldSet => "campo {} guardado con {}",
        SimFlowSent => "flujo {} enviado",
        SimTagAdded => "etiqueta {} añadida",
        SimTagRemoved => "etiqueta {} quitada",
        SimNoteWritten => "nota {} escrita ({} caracteres)",
        SimNudgeScheduled => "un seguimiento programado",
        SimFailed => "falló: {}",
        SimRefused => "rechazado: {}",
    }
}
